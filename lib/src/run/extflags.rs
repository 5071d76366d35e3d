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
/// `(index among clap's arguments, text)`.
#[allow(clippy::type_complexity)]
pub fn resolve(
    pending: &[Pending],
    flags: &[FlagSpec],
) -> Result<(Map<String, Value>, Vec<(usize, String)>), CliError> {
    let mut values = Map::new();
    let mut back = Vec::new();
    for p in pending {
        let Some(f) = flags.iter().find(|f| f.name == p.name) else {
            return Err(CliError::input(format!(
                "unknown option --{} (no extension registered it)",
                p.name
            ))
            .with_hint(
                "see pi-run --help; extension flags exist only when their extension loads",
            ));
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
        let (values, back) = resolve(&pending, &flags).unwrap();
        assert_eq!(values["probe"], true);
        assert_eq!(values["name-it"], "x");
        assert_eq!(values["dry"], true);
        assert_eq!(back, [(3, "first".to_string())]);
        let mut msgs = vec!["second".to_string()];
        let pos = positions(&args, &msgs);
        reinsert(&mut msgs, &pos, back);
        assert_eq!(msgs, ["first", "second"]);
        // A flag nobody registered is a usage error.
        assert!(resolve(&pending, &flags[..1]).is_err());
    }
}
