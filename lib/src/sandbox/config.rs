//! Which sandbox a run asks for: the user's settings set the default, the
//! command line overrides it in either direction, and a trusted project's
//! `.pi/settings.json` may only tighten the result (an untrusted project's
//! settings are never read). The `"sandbox"` value of a settings file is a
//! mode string or `{"mode", "network", "writableRoots", "denyRead",
//! "envKeep"}`; anything else is an error naming the file and the field.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// How much a sandboxed command may do. The order is strictness:
/// `ReadOnly < WorkspaceWrite < DangerFullAccess`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mode {
    /// Reads everywhere except the hidden credential stores; no writes.
    ReadOnly,
    /// Writes to the workspace, the temp dir and `writableRoots`, except
    /// the workspace's read-only paths.
    WorkspaceWrite,
    /// No sandbox (the default, as in pi).
    DangerFullAccess,
}

impl Mode {
    /// Every mode, strictest first.
    pub const ALL: [Mode; 3] = [Mode::ReadOnly, Mode::WorkspaceWrite, Mode::DangerFullAccess];

    /// The mode's name on the command line and in settings.
    pub fn name(self) -> &'static str {
        match self {
            Mode::ReadOnly => "read-only",
            Mode::WorkspaceWrite => "workspace-write",
            Mode::DangerFullAccess => "danger-full-access",
        }
    }

    /// The mode named `s`.
    pub fn parse(s: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.name() == s)
    }
}

/// What the command line asks for (`None`: not given).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CliSandbox {
    /// `--sandbox MODE`.
    pub mode: Option<Mode>,
    /// `--sandbox-network[=on|off]`.
    pub network: Option<bool>,
    /// `--env-keep NAME` (repeatable).
    pub env_keep: Vec<String>,
}

/// One settings file's `"sandbox"` value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FileSandbox {
    pub mode: Option<Mode>,
    pub network: Option<bool>,
    pub writable_roots: Vec<String>,
    pub deny_read: Vec<String>,
    pub env_keep: Vec<String>,
}

/// The sandbox the run asks for, before any path is looked at.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub mode: Mode,
    /// Network allowed (always true without a sandbox).
    pub network: bool,
    /// Extra writable roots as written (`~` and relative paths resolved
    /// against the workspace later).
    pub writable_roots: Vec<String>,
    /// Extra hidden paths as written.
    pub deny_read: Vec<String>,
    /// Environment variables to pass although they look secret.
    pub env_keep: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            mode: Mode::DangerFullAccess,
            network: true,
            writable_roots: Vec::new(),
            deny_read: Vec::new(),
            env_keep: Vec::new(),
        }
    }
}

/// Reads `"sandbox"` from a settings file's top-level object (`None` when
/// the key is absent). `file` names the file in errors.
pub fn parse(
    values: &serde_json::Map<String, Value>,
    file: &Path,
) -> Result<Option<FileSandbox>, String> {
    let Some(v) = values.get("sandbox") else {
        return Ok(None);
    };
    let at = |field: &str| format!("{}: sandbox{field}", file.display());
    let mode = |v: &Value, field: &str| -> Result<Mode, String> {
        let s = v
            .as_str()
            .ok_or_else(|| format!("{}: must be a mode string", at(field)))?;
        Mode::parse(s).ok_or_else(|| {
            format!(
                "{}: unknown mode \"{s}\" (read-only, workspace-write or danger-full-access)",
                at(field)
            )
        })
    };
    match v {
        Value::String(_) => Ok(Some(FileSandbox {
            mode: Some(mode(v, "")?),
            ..FileSandbox::default()
        })),
        Value::Object(o) => {
            let mut out = FileSandbox::default();
            for (k, v) in o {
                let field = format!(".{k}");
                match k.as_str() {
                    "mode" => out.mode = Some(mode(v, &field)?),
                    "network" => {
                        out.network = Some(
                            v.as_bool()
                                .ok_or_else(|| format!("{}: must be true or false", at(&field)))?,
                        )
                    }
                    "writableRoots" => out.writable_roots = strings(v, &at(&field))?,
                    "denyRead" => out.deny_read = strings(v, &at(&field))?,
                    "envKeep" => out.env_keep = strings(v, &at(&field))?,
                    _ => {
                        return Err(format!(
                            "{}: unknown field (mode, network, writableRoots, denyRead, envKeep)",
                            at(&field)
                        ))
                    }
                }
            }
            Ok(Some(out))
        }
        _ => Err(format!("{}: must be a mode string or an object", at(""))),
    }
}

/// A list of non-empty strings.
fn strings(v: &Value, at: &str) -> Result<Vec<String>, String> {
    let Value::Array(a) = v else {
        return Err(format!("{at}: must be a list of strings"));
    };
    a.iter()
        .enumerate()
        .map(|(i, s)| match s.as_str() {
            Some(s) if !s.is_empty() => Ok(s.to_string()),
            _ => Err(format!("{at}[{i}]: must be a non-empty string")),
        })
        .collect()
}

/// The sandbox of a run: the user's settings, then the command line, then
/// a trusted project's tightening. The warnings name what a project asked
/// for that would have loosened the sandbox (ignored).
pub fn resolve(
    user: Option<FileSandbox>,
    project: Option<(FileSandbox, PathBuf)>,
    cli: &CliSandbox,
) -> (Config, Vec<String>) {
    let user = user.unwrap_or_default();
    let mut c = Config {
        mode: cli.mode.or(user.mode).unwrap_or(Mode::DangerFullAccess),
        network: false,
        writable_roots: user.writable_roots,
        deny_read: user.deny_read,
        env_keep: user.env_keep,
    };
    c.network = cli.network.or(user.network).unwrap_or(false);
    c.env_keep.extend(cli.env_keep.iter().cloned());
    let mut warnings = Vec::new();
    if let Some((p, file)) = project {
        let ignored = |what: &str| {
            format!(
                "{}: sandbox.{what} ignored: a project may only tighten the sandbox",
                file.display()
            )
        };
        if let Some(m) = p.mode {
            if m < c.mode {
                c.mode = m;
            } else if m > c.mode {
                warnings.push(ignored("mode"));
            }
        }
        match p.network {
            Some(false) => c.network = false,
            Some(true) if !c.network && c.mode != Mode::DangerFullAccess => {
                warnings.push(ignored("network"))
            }
            _ => {}
        }
        c.deny_read.extend(p.deny_read);
        if !p.writable_roots.is_empty() {
            warnings.push(ignored("writableRoots"));
        }
        if !p.env_keep.is_empty() {
            warnings.push(ignored("envKeep"));
        }
    }
    if c.mode == Mode::DangerFullAccess {
        c.network = true;
    }
    (c, warnings)
}

/// The run's sandbox from the user's `settings.json` in `agent_dir`, the
/// command line and, when `trusted`, the project's `.pi/settings.json` in
/// `cwd`. Errors name the file and field.
pub fn load(
    agent_dir: &Path,
    cwd: &Path,
    trusted: bool,
    cli: &CliSandbox,
) -> Result<(Config, Vec<String>), String> {
    let user_file = agent_dir.join("settings.json");
    let user = crate::settings::read_file(&user_file).map_err(|e| e.to_string())?;
    let user = parse(&user, &user_file)?;
    let project = if trusted {
        let file = cwd.join(".pi").join("settings.json");
        let values = crate::settings::read_file(&file).map_err(|e| e.to_string())?;
        parse(&values, &file)?.map(|p| (p, file))
    } else {
        None
    };
    Ok(resolve(user, project, cli))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn file(v: Value) -> Option<FileSandbox> {
        let Value::Object(o) = json!({ "sandbox": v }) else {
            unreachable!()
        };
        parse(&o, Path::new("s.json")).unwrap()
    }

    fn err(v: Value) -> String {
        let Value::Object(o) = json!({ "sandbox": v }) else {
            unreachable!()
        };
        parse(&o, Path::new("s.json")).unwrap_err()
    }

    #[test]
    fn settings_forms_and_errors() {
        assert_eq!(file(json!("read-only")).unwrap().mode, Some(Mode::ReadOnly));
        let f = file(json!({"mode": "workspace-write", "network": true, "writableRoots": ["~/x"], "denyRead": ["/s"], "envKeep": ["GH_TOKEN"]})).unwrap();
        assert_eq!(f.mode, Some(Mode::WorkspaceWrite));
        assert_eq!(f.network, Some(true));
        assert_eq!(f.writable_roots, ["~/x"]);
        assert_eq!(f.deny_read, ["/s"]);
        assert_eq!(f.env_keep, ["GH_TOKEN"]);
        assert!(err(json!("bogus")).contains("s.json: sandbox: unknown mode \"bogus\""));
        assert!(err(json!(3)).contains("s.json: sandbox: must be a mode string or an object"));
        assert!(err(json!({"mode": 1})).contains("sandbox.mode: must be a mode string"));
        assert!(err(json!({"network": "no"})).contains("sandbox.network: must be true or false"));
        assert!(err(json!({"denyRead": ["a", 2]})).contains("sandbox.denyRead[1]"));
        assert!(err(json!({"writableroots": []})).contains("sandbox.writableroots: unknown field"));
    }

    fn with(mode: Option<Mode>, network: Option<bool>) -> FileSandbox {
        FileSandbox {
            mode,
            network,
            ..FileSandbox::default()
        }
    }

    #[test]
    fn command_line_overrides_user_settings_both_ways() {
        let user = Some(with(Some(Mode::WorkspaceWrite), Some(true)));
        let (c, _) = resolve(user.clone(), None, &CliSandbox::default());
        assert_eq!((c.mode, c.network), (Mode::WorkspaceWrite, true));
        let cli = CliSandbox {
            mode: Some(Mode::DangerFullAccess),
            ..CliSandbox::default()
        };
        assert_eq!(
            resolve(user.clone(), None, &cli).0.mode,
            Mode::DangerFullAccess
        );
        let cli = CliSandbox {
            mode: Some(Mode::ReadOnly),
            network: Some(false),
            ..CliSandbox::default()
        };
        let (c, _) = resolve(user, None, &cli);
        assert_eq!((c.mode, c.network), (Mode::ReadOnly, false));
        let (c, _) = resolve(None, None, &CliSandbox::default());
        assert_eq!((c.mode, c.network), (Mode::DangerFullAccess, true));
    }

    #[test]
    fn a_project_only_tightens() {
        let p = |f: FileSandbox| Some((f, PathBuf::from("p/.pi/settings.json")));
        let user = Some(with(Some(Mode::WorkspaceWrite), Some(false)));
        let cli = CliSandbox::default();
        // Looser: ignored, with a warning.
        let (c, w) = resolve(
            user.clone(),
            p(with(Some(Mode::DangerFullAccess), Some(true))),
            &cli,
        );
        assert_eq!((c.mode, c.network), (Mode::WorkspaceWrite, false));
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("sandbox.mode ignored: a project may only tighten"));
        // Tighter: taken.
        let (c, w) = resolve(user.clone(), p(with(Some(Mode::ReadOnly), None)), &cli);
        assert_eq!(c.mode, Mode::ReadOnly);
        assert!(w.is_empty());
        // A project tightens a sandbox-less user too, and turns the network off.
        let (c, _) = resolve(None, p(with(Some(Mode::WorkspaceWrite), Some(false))), &cli);
        assert_eq!((c.mode, c.network), (Mode::WorkspaceWrite, false));
        let user_net = Some(with(Some(Mode::WorkspaceWrite), Some(true)));
        let (c, _) = resolve(user_net, p(with(None, Some(false))), &cli);
        assert!(!c.network);
        // Extra hidden paths tighten; roots and kept variables loosen.
        let f = FileSandbox {
            deny_read: vec!["/d".into()],
            writable_roots: vec!["/w".into()],
            env_keep: vec!["K".into()],
            ..FileSandbox::default()
        };
        let (c, w) = resolve(user, p(f), &cli);
        assert_eq!(c.deny_read, ["/d"]);
        assert!(c.writable_roots.is_empty() && c.env_keep.is_empty());
        assert_eq!(w.len(), 2, "{w:?}");
    }
}
