//! Long options a binary does not know: set aside before clap parses
//! (extensions register flags of their own once they load), then either
//! given to the extension that registered them or refused with the
//! closest known option as a did-you-mean.

/// One unknown long option, as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    pub name: String,
    /// `--name=value`.
    pub inline: Option<String>,
    /// The token after `--name`, when it was not an option.
    pub next: Option<String>,
    /// How many arguments clap got before this one (to put `next` back).
    pub at: usize,
    /// The command's own option closest to `name`, when one is close (a
    /// typo of a built-in option, unless an extension registers `name`).
    pub near: Option<String>,
}

/// The name among `candidates` closest to `name`, when it is close
/// enough to be the one meant (Jaro similarity, clap's measure and bar).
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (strsim::jaro(name, c), c))
        .filter(|(score, _)| *score > 0.7)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

/// Splits `args` (program name first) into what clap parses and the
/// long options `cmd` does not know (extension flags, resolved once the
/// extensions registered theirs): each set aside with the token after it
/// when that is not an option (it may be the flag's value or a message).
pub fn split_unknown_options(
    args: Vec<std::ffi::OsString>,
    cmd: &clap::Command,
) -> (Vec<std::ffi::OsString>, Vec<Pending>) {
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
    let visible: Vec<String> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set())
        .filter_map(|a| a.get_long().map(str::to_string))
        .chain(["help".to_string()])
        .collect();
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
                    let near =
                        closest(&name, visible.iter().map(String::as_str)).map(str::to_string);
                    pending.push(Pending {
                        name,
                        inline,
                        next,
                        at: out.len(),
                        near,
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
