//! Extension flags on the command line. pi parses `--<name>` for the flags
//! extensions register, after they load; the binaries set aside every long
//! option clap does not know ([`crate::cli::split_unknown_options`]), and
//! once the extensions registered their flags each one set aside is
//! resolved here: a string flag takes its value, a boolean flag gives the
//! following token back as a message at its place, and a flag no extension
//! registered is a usage error.

use std::ffi::OsString;

use serde_json::{Map, Value};

use crate::cli::CliError;
pub use crate::cli::Pending;
use crate::format::extension::FlagSpec;

/// Resolves the set-aside options against the registered flags: the
/// values by flag name, and the tokens that go back to the messages as
/// `(index among clap's arguments, text)`. `extensions_loaded` says
/// whether any extension runs (only then is an unknown option worth an
/// extension hint).
#[allow(clippy::type_complexity)]
pub fn resolve(
    pending: &[Pending],
    flags: &[FlagSpec],
    extensions_loaded: bool,
) -> Result<(Map<String, Value>, Vec<(usize, String)>), CliError> {
    let mut values = Map::new();
    let mut back = Vec::new();
    for p in pending {
        let Some(f) = flags.iter().find(|f| f.name == p.name) else {
            return Err(unknown(p, flags, extensions_loaded));
        };
        if f.kind == "string" {
            let Some(v) = p.inline.clone().or_else(|| p.next.clone()) else {
                return Err(CliError::input(format!("--{} needs a value", p.name)));
            };
            if p.inline.is_some() {
                if let Some(n) = &p.next {
                    back.push((p.at, n.clone()));
                }
            }
            values.insert(p.name.clone(), Value::String(v));
        } else {
            let v = match p.inline.as_deref() {
                None | Some("true") => true,
                Some("false") => false,
                Some(other) => {
                    return Err(CliError::input(format!(
                        "--{}={other}: a boolean flag takes true or false",
                        p.name
                    )))
                }
            };
            if let Some(n) = &p.next {
                back.push((p.at, n.clone()));
            }
            values.insert(p.name.clone(), Value::Bool(v));
        }
    }
    Ok((values, back))
}

/// The error for an option neither pi-run nor a loaded extension knows:
/// the closest option (built-in or an extension's) as a did-you-mean, and
/// a word about extension flags only when extensions are loaded.
fn unknown(p: &Pending, flags: &[FlagSpec], extensions_loaded: bool) -> CliError {
    let candidates = p
        .near
        .iter()
        .map(String::as_str)
        .chain(flags.iter().map(|f| f.name.as_str()));
    let near = crate::cli::closest(&p.name, candidates);
    let what = if extensions_loaded {
        format!(
            "unknown option --{} (no loaded extension registers it)",
            p.name
        )
    } else {
        format!("unknown option --{}", p.name)
    };
    let hint = match (near, extensions_loaded) {
        (Some(n), _) => format!("did you mean --{n}? (pi-run --help lists the options)"),
        (None, false) => "pi-run --help lists the options".to_string(),
        (None, true) if flags.is_empty() => {
            "pi-run --help lists the options; the loaded extensions register no flags".to_string()
        }
        (None, true) => format!(
            "pi-run --help lists the options; the loaded extensions register {}",
            flags
                .iter()
                .map(|f| format!("--{}", f.name))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    CliError::input(what).with_hint(hint)
}

/// Puts tokens back among the messages: each before the first message
/// clap got after its place. `positions[i]` is where message `i` sat in
/// clap's arguments.
pub fn reinsert(messages: &mut Vec<String>, positions: &[usize], back: Vec<(usize, String)>) {
    let mut tagged: Vec<(usize, String)> =
        positions.iter().copied().zip(messages.drain(..)).collect();
    for (at, text) in back {
        // Ties: a returned token came before the message at that index.
        let i = tagged
            .iter()
            .position(|(p, _)| *p >= at)
            .unwrap_or(tagged.len());
        tagged.insert(i, (at, text));
    }
    messages.extend(tagged.into_iter().map(|(_, t)| t));
}

/// Where each message sits in clap's arguments: matched in order.
pub fn positions(args: &[OsString], messages: &[String]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut from = 1;
    for m in messages {
        let i = (from..args.len())
            .find(|&i| args[i].to_str() == Some(m.as_str()))
            .unwrap_or(args.len());
        out.push(i);
        from = (i + 1).min(args.len());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn flags_set_aside_and_resolved() {
        let cmd = clap::Command::new("pi-run")
            .arg(clap::Arg::new("model").long("model"))
            .arg(clap::Arg::new("extension").short('e').long("extension"))
            .arg(clap::Arg::new("messages").num_args(0..));
        let (args, pending) = crate::cli::split_unknown_options(
            os(&[
                "pi-run",
                "--model",
                "m",
                "--probe",
                "first",
                "--name-it=x",
                "--dry",
                "-e",
                "a.py",
                "second",
            ]),
            &cmd,
        );
        assert_eq!(
            args,
            os(&["pi-run", "--model", "m", "-e", "a.py", "second"])
        );
        assert_eq!(pending.len(), 3);
        let flag = |name: &str, kind: &str| FlagSpec {
            name: name.into(),
            kind: kind.into(),
            default: None,
            description: None,
        };
        let flags = vec![
            flag("probe", "boolean"),
            flag("name-it", "string"),
            flag("dry", "boolean"),
        ];
        let (values, back) = resolve(&pending, &flags, true).unwrap();
        assert_eq!(values["probe"], true);
        assert_eq!(values["name-it"], "x");
        assert_eq!(values["dry"], true);
        assert_eq!(back, [(3, "first".to_string())]);
        let mut msgs = vec!["second".to_string()];
        let pos = positions(&args, &msgs);
        reinsert(&mut msgs, &pos, back);
        assert_eq!(msgs, ["first", "second"]);
        // A flag nobody registered is a usage error.
        assert!(resolve(&pending, &flags[..1], true).is_err());
    }

    fn pending(name: &str, near: Option<&str>) -> Pending {
        Pending {
            name: name.into(),
            inline: None,
            next: None,
            at: 1,
            near: near.map(str::to_string),
        }
    }

    #[test]
    fn an_unknown_option_gets_the_closest_one_and_an_extension_hint_only_with_extensions() {
        let cmd = clap::Command::new("pi-run")
            .arg(clap::Arg::new("max-turns").long("max-turns"))
            .arg(
                clap::Arg::new("no-approve")
                    .long("no-approve")
                    .action(clap::ArgAction::SetTrue),
            )
            .arg(clap::Arg::new("model").long("model"))
            .arg(clap::Arg::new("secret").long("secret-option").hide(true));
        let (_, p) = crate::cli::split_unknown_options(
            os(&[
                "pi-run",
                "--max-turn",
                "3",
                "--no-aprove",
                "--zzz",
                "--secret-optio",
            ]),
            &cmd,
        );
        let near: Vec<_> = p.iter().map(|p| p.near.as_deref()).collect();
        assert_eq!(near, [Some("max-turns"), Some("no-approve"), None, None]);

        let e = resolve(&p[..1], &[], false).unwrap_err();
        assert_eq!(e.message, "unknown option --max-turn");
        let hint = e.hint.clone().unwrap_or_default();
        assert!(hint.starts_with("did you mean --max-turns?"), "{hint}");
        assert!(!hint.contains("extension"), "{hint}");
        let e = resolve(&p[2..3], &[], false).unwrap_err();
        assert!(!e.hint.as_deref().unwrap_or_default().contains("extension"));
        // With extensions loaded, their flags are candidates too, and the
        // message says none of them registers the option.
        let dry = FlagSpec {
            name: "dry-run".into(),
            kind: "boolean".into(),
            default: None,
            description: None,
        };
        let e = resolve(&[pending("dry-rn", None)], std::slice::from_ref(&dry), true).unwrap_err();
        assert_eq!(
            e.message,
            "unknown option --dry-rn (no loaded extension registers it)"
        );
        assert!(e
            .hint
            .as_deref()
            .unwrap_or_default()
            .starts_with("did you mean --dry-run?"));
        let e = resolve(&[pending("zzz", None)], &[dry], true).unwrap_err();
        assert!(e
            .hint
            .as_deref()
            .unwrap_or_default()
            .contains("register --dry-run"));
    }
}
