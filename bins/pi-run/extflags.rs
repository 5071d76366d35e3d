//! Extension flags on the command line (pi parses `--<name>` for flags
//! extensions register, after they load). Before clap sees the arguments,
//! every long option clap does not know is set aside with the token after
//! it (when that is not an option: it may be the flag's value or a
//! message); once the extensions registered their flags, each one set
//! aside is resolved: a string flag takes its value, a boolean flag gives
//! the following token back as a message at its place, and a flag no
//! extension registered is a usage error.

use std::ffi::OsString;

use pi_lib::cli::CliError;
use pi_lib::format::extension::FlagSpec;
use serde_json::{Map, Value};

/// One unknown long option, as given.
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    pub name: String,
    /// `--name=value`.
    pub inline: Option<String>,
    /// The token after `--name`, when it was not an option.
    pub next: Option<String>,
    /// How many arguments clap got before this one (to put `next` back).
    pub at: usize,
}

/// Splits `args` (program name first) into what clap parses and the
/// unknown long options.
pub fn split(args: Vec<OsString>, cmd: &clap::Command) -> (Vec<OsString>, Vec<Pending>) {
    let mut longs: Vec<(String, bool)> = Vec::new();
    let mut shorts: Vec<(char, bool)> = Vec::new();
    for a in cmd.get_arguments() {
        let takes = a.get_action().takes_values();
        if let Some(l) = a.get_long() {
            longs.push((l.to_string(), takes));
        }
        for l in a.get_all_aliases().unwrap_or_default() {
            longs.push((l.to_string(), takes));
        }
        if let Some(s) = a.get_short() {
            shorts.push((s, takes));
        }
    }
    longs.push(("help".into(), false));
    let mut out = Vec::new();
    let mut pending = Vec::new();
    let mut it = args.into_iter().peekable();
    if let Some(p) = it.next() {
        out.push(p);
    }
    while let Some(a) = it.next() {
        let Some(s) = a.to_str().map(str::to_string) else {
            out.push(a);
            continue;
        };
        if s == "--" {
            out.push(a);
            out.extend(it);
            break;
        }
        if let Some(body) = s.strip_prefix("--") {
            let (name, inline) = match body.split_once('=') {
                Some((n, v)) => (n.to_string(), Some(v.to_string())),
                None => (body.to_string(), None),
            };
            match longs.iter().find(|(l, _)| *l == name) {
                Some((_, takes)) => {
                    out.push(a);
                    if *takes && inline.is_none() {
                        if let Some(v) = it.next() {
                            out.push(v);
                        }
                    }
                }
                None => {
                    let next = if inline.is_none() {
                        match it.peek().and_then(|n| n.to_str()) {
                            Some(n) if !n.starts_with('-') => {
                                it.next().and_then(|n| n.into_string().ok())
                            }
                            _ => None,
                        }
                    } else {
                        None
                    };
                    pending.push(Pending {
                        name,
                        inline,
                        next,
                        at: out.len(),
                    });
                }
            }
            continue;
        }
        // A known short option's value is not a message.
        let takes_short = s.len() == 2
            && s.starts_with('-')
            && shorts
                .iter()
                .any(|(c, t)| *t && s.chars().nth(1) == Some(*c));
        out.push(a);
        if takes_short {
            if let Some(v) = it.next() {
                out.push(v);
            }
        }
    }
    (out, pending)
}

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
        use clap::CommandFactory;
        let cmd = crate::cli::Cli::command();
        let (args, pending) = split(
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
        let flags = vec![
            FlagSpec {
                name: "probe".into(),
                kind: "boolean".into(),
                default: None,
                description: None,
            },
            FlagSpec {
                name: "name-it".into(),
                kind: "string".into(),
                default: None,
                description: None,
            },
            FlagSpec {
                name: "dry".into(),
                kind: "boolean".into(),
                default: None,
                description: None,
            },
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
