//! Suppression of the legacy `pi-subagents` extension while the built-in is
//! on (the two would declare the same tools): an extension *recognised* as `pi-subagents` — its
//! package source is `pi-subagents` (`npm:` and a version stripped), or a
//! path segment is exactly `pi-subagents` — that registers any reserved
//! control tool is removed from the loaded set, with its errors and the
//! built-in's `Tool "<name>" conflicts with <legacy path>` errors. An
//! unrelated extension using the same names is kept and its collisions are
//! reported; with the built-in off (no `Agent` on the host) nothing changes.

use super::tools::EXTENSION_PATH;
use super::CONTROL_TOOL_NAMES;

/// What the rule needs to know about one loaded extension.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedExtension {
    pub path: String,
    /// The package source (`npm:pi-subagents@1.2.3`), `""` or `local` for files.
    pub source: String,
    pub tools: Vec<String>,
}

/// A load error attributed to an extension path.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadError {
    pub path: String,
    pub message: String,
}

/// Whether an extension is recognised as the legacy `pi-subagents`.
pub fn is_legacy_package(path: &str, source: &str) -> bool {
    let src = source.strip_prefix("npm:").unwrap_or(source);
    let name = src.split('@').next().unwrap_or("");
    name == "pi-subagents"
        || path
            .replace('\\', "/")
            .split('/')
            .any(|s| s == "pi-subagents")
}

/// The paths of the extensions to remove (empty: leave the set alone).
pub fn legacy_paths(exts: &[LoadedExtension]) -> Vec<String> {
    let host_on = exts
        .iter()
        .any(|e| e.path == EXTENSION_PATH && e.tools.iter().any(|t| t == "Agent"));
    if !host_on {
        return Vec::new();
    }
    exts.iter()
        .filter(|e| e.path != EXTENSION_PATH)
        .filter(|e| {
            e.tools
                .iter()
                .any(|t| CONTROL_TOOL_NAMES.contains(&t.as_str()))
        })
        .filter(|e| is_legacy_package(&e.path, &e.source))
        .map(|e| e.path.clone())
        .collect()
}

/// Applies the rule: the kept extensions (order kept) and errors.
pub fn suppress(
    exts: Vec<LoadedExtension>,
    errors: Vec<LoadError>,
) -> (Vec<LoadedExtension>, Vec<LoadError>) {
    let legacy = legacy_paths(&exts);
    if legacy.is_empty() {
        return (exts, errors);
    }
    let exts = exts
        .into_iter()
        .filter(|e| !legacy.contains(&e.path))
        .collect();
    let errors = errors
        .into_iter()
        .filter(|e| keep_error(e, &legacy))
        .collect();
    (exts, errors)
}

/// Whether an error survives the removal of the `legacy` extensions.
pub fn keep_error(e: &LoadError, legacy: &[String]) -> bool {
    if legacy.contains(&e.path) {
        return false;
    }
    if e.path == EXTENSION_PATH {
        let collision = CONTROL_TOOL_NAMES.iter().any(|name| {
            legacy
                .iter()
                .any(|l| e.message == format!("Tool \"{name}\" conflicts with {l}"))
        });
        return !collision;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ext(path: &str, tools: &[&str]) -> LoadedExtension {
        LoadedExtension {
            path: path.into(),
            source: "local".into(),
            tools: tools.iter().map(|t| t.to_string()).collect(),
        }
    }
    fn err(path: &str, message: &str) -> LoadError {
        LoadError {
            path: path.into(),
            message: message.into(),
        }
    }
    const ALL: [&str; 3] = CONTROL_TOOL_NAMES;

    #[test]
    fn recognition() {
        assert!(is_legacy_package("/x/index.ts", "npm:pi-subagents@1.2.3"));
        assert!(!is_legacy_package(
            "/x/index.ts",
            "npm:@tintinweb/pi-subagents"
        ));
        assert!(is_legacy_package("/tmp/pi-subagents/index.ts", ""));
        assert!(is_legacy_package(
            "/a/npm/node_modules/@tintinweb/pi-subagents/src/index.ts",
            "local"
        ));
        assert!(is_legacy_package("C:\\x\\pi-subagents\\index.ts", ""));
        assert!(!is_legacy_package("/tmp/pi-subagents-fork/index.ts", ""));
        assert!(!is_legacy_package("/tmp/Pi-Subagents/index.ts", ""));
    }

    #[test]
    fn legacy_removed_lookalike_and_others_kept() {
        let exts = vec![
            ext("/tmp/pi-subagents/index.ts", &ALL),
            ext("/tmp/unrelated/index.ts", &ALL),
            ext(EXTENSION_PATH, &ALL),
            ext("/tmp/other.ts", &["search"]),
        ];
        let errors = vec![
            err("/tmp/pi-subagents/index.ts", "duplicate"),
            err("/tmp/other.ts", "other"),
            err(
                EXTENSION_PATH,
                "Tool \"Agent\" conflicts with /tmp/unrelated/index.ts",
            ),
        ];
        let (kept, errs) = suppress(exts, errors);
        let paths: Vec<&str> = kept.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            ["/tmp/unrelated/index.ts", EXTENSION_PATH, "/tmp/other.ts"]
        );
        assert_eq!(
            errs,
            [
                err("/tmp/other.ts", "other"),
                err(
                    EXTENSION_PATH,
                    "Tool \"Agent\" conflicts with /tmp/unrelated/index.ts"
                )
            ]
        );
    }

    #[test]
    fn a_partial_legacy_is_removed_with_the_hosts_collision_errors() {
        for name in ALL {
            let exts = vec![
                ext("/tmp/pi-subagents/index.ts", &[name]),
                ext(EXTENSION_PATH, &ALL),
                ext("/tmp/other.ts", &["search"]),
            ];
            let errors = vec![err(
                EXTENSION_PATH,
                &format!("Tool \"{name}\" conflicts with /tmp/pi-subagents/index.ts"),
            )];
            let (kept, errs) = suppress(exts, errors);
            assert_eq!(kept.len(), 2, "{name}");
            assert!(errs.is_empty(), "{name}");
        }
    }

    #[test]
    fn off_or_absent_host_leaves_everything() {
        let legacy = ext("/tmp/pi-subagents/index.ts", &ALL);
        let errors = vec![err("/tmp/pi-subagents/index.ts", "duplicate")];
        for exts in [
            vec![legacy.clone(), ext(EXTENSION_PATH, &[])],
            vec![legacy.clone()],
        ] {
            let (kept, errs) = suppress(exts.clone(), errors.clone());
            assert_eq!(kept, exts);
            assert_eq!(errs, errors);
        }
        // A legacy package registering none of the reserved names stays.
        let exts = vec![
            ext("/tmp/pi-subagents/index.ts", &["subagent"]),
            ext(EXTENSION_PATH, &ALL),
        ];
        assert_eq!(suppress(exts.clone(), vec![]).0, exts);
    }
}
