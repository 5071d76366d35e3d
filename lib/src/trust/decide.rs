//! The trust decision itself, in pi 1.6.0's order, and the interactive
//! prompt with pi's wording and its five choices.
//!
//! Order: CLI override (never saved) → no protected
//! resources ⇒ nearest saved decision, else trusted → an extension hook
//! (first yes/no wins; `remember` saves cwd → decision) → nearest saved
//! decision → global `defaultProjectTrust` (`always` / `never`; anything
//! else is `ask`) → not interactive ⇒ untrusted → the prompt (cancel ⇒
//! untrusted, nothing saved). trust.json is read only when a step needs it,
//! exactly like pi: with `-a`/`-na` a corrupt store is never even opened.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use super::protected::{canonicalize_dir, protected_paths};
use super::store::{TrustStore, TrustUpdate};
use super::{CliTrust, DefaultTrust, TrustError, TrustHook, TrustOutcome, TrustReason};

/// The prompt's title line.
pub const PROMPT_TITLE: &str = "Trust project folder?";
/// The prompt's explanation, shown under the cwd.
pub const PROMPT_MESSAGE: &str = "This allows pi to load .pi settings and resources, install missing project packages, and execute project extensions.";

/// One answer the trust prompt (or `/trust`) offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustChoice {
    /// pi's label, e.g. `Trust parent folder (/home/ann)`.
    pub label: String,
    /// Whether choosing it trusts the project for this run.
    pub trusted: bool,
    /// What it saves in trust.json (empty: this session only).
    pub updates: Vec<TrustUpdate>,
    /// The key the saved decision lives under, if anything is saved.
    pub saved_path: Option<PathBuf>,
}

/// pi's choices for the canonical directory `cwd`, in pi's order: Trust,
/// Trust parent folder (absent at the root), [Trust (this session only)],
/// Do not trust, [Do not trust (this session only)]. The bracketed ones
/// only with `include_session_only` (the startup prompt; `/trust` omits
/// them).
pub fn trust_choices(cwd: &Path, include_session_only: bool) -> Vec<TrustChoice> {
    let mut out = vec![TrustChoice {
        label: "Trust".into(),
        trusted: true,
        updates: vec![TrustUpdate::set(cwd, true)],
        saved_path: Some(cwd.to_path_buf()),
    }];
    if let Some(parent) = cwd.parent() {
        out.push(TrustChoice {
            label: format!("Trust parent folder ({})", parent.display()),
            trusted: true,
            updates: vec![TrustUpdate::set(parent, true), TrustUpdate::remove(cwd)],
            saved_path: Some(parent.to_path_buf()),
        });
    }
    if include_session_only {
        out.push(TrustChoice {
            label: "Trust (this session only)".into(),
            trusted: true,
            updates: Vec::new(),
            saved_path: None,
        });
    }
    out.push(TrustChoice {
        label: "Do not trust".into(),
        trusted: false,
        updates: vec![TrustUpdate::set(cwd, false)],
        saved_path: Some(cwd.to_path_buf()),
    });
    if include_session_only {
        out.push(TrustChoice {
            label: "Do not trust (this session only)".into(),
            trusted: false,
            updates: Vec::new(),
            saved_path: None,
        });
    }
    out
}

/// What the interactive prompt shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustPrompt {
    /// The canonical cwd.
    pub cwd: PathBuf,
    /// The protected paths that made the question necessary.
    pub protected_paths: Vec<PathBuf>,
    /// The five choices.
    pub choices: Vec<TrustChoice>,
}

/// Asks the user: returns the index of the chosen [`TrustChoice`], or
/// `None` for cancel.
pub type TrustPrompter<'a> = &'a mut dyn FnMut(&TrustPrompt) -> Option<usize>;

/// `defaultProjectTrust` from the **global** `<agent_dir>/settings.json`
/// only (pi ignores the project's). Missing, unreadable or any other value
/// means `ask`.
pub fn default_project_trust(agent_dir: &Path) -> DefaultTrust {
    let settings = match crate::settings::read_file(&agent_dir.join("settings.json")) {
        Ok(s) => s,
        Err(_) => return DefaultTrust::Ask,
    };
    match settings
        .get("defaultProjectTrust")
        .and_then(serde_json::Value::as_str)
    {
        Some("always") => DefaultTrust::Always,
        Some("never") => DefaultTrust::Never,
        _ => DefaultTrust::Ask,
    }
}

/// Whether the built-in prompt may be shown: stdin and stderr are terminals.
pub fn is_interactive() -> bool {
    use std::io::IsTerminal;
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// Everything [`decide_with`] needs; [`super::decide`] fills it from the
/// process (real `$HOME`, a terminal prompt).
pub struct DecideInput<'a, 'h, 'p> {
    pub cwd: &'a Path,
    pub agent_dir: &'a Path,
    /// The user's home (its `.agents/skills` is not a project resource).
    pub home: &'a Path,
    pub cli: CliTrust,
    pub hook: Option<TrustHook<'h>>,
    /// Whether to ask when nothing else decides (`None` prompter: untrusted).
    pub interactive: bool,
    /// How to ask; `None` with `interactive` uses [`terminal_prompt`].
    pub prompter: Option<TrustPrompter<'p>>,
}

/// The decision for `input.cwd`, in pi's order (see the module docs).
pub fn decide_with(input: DecideInput<'_, '_, '_>) -> Result<TrustOutcome, TrustError> {
    let cwd = canonicalize_dir(input.cwd);
    let protected = protected_paths(&cwd, input.home);
    let store = TrustStore::in_agent_dir(input.agent_dir);
    let outcome = |trusted, reason, saved_path| TrustOutcome {
        trusted,
        reason,
        protected_paths: protected.clone(),
        saved_path,
    };

    match input.cli {
        CliTrust::Approve => return Ok(outcome(true, TrustReason::Cli, None)),
        CliTrust::NoApprove => return Ok(outcome(false, TrustReason::Cli, None)),
        CliTrust::Unset => {}
    }

    if protected.is_empty() {
        return Ok(match store.load()?.nearest(&cwd) {
            Some(s) => outcome(s.trusted, TrustReason::Saved, Some(s.path)),
            None => outcome(true, TrustReason::NoProtectedResources, None),
        });
    }

    if let Some(hook) = input.hook {
        if let Some((trusted, remember)) = hook(&cwd) {
            let mut saved = None;
            if remember {
                store.set_many(&[TrustUpdate::set(&cwd, trusted)])?;
                saved = Some(cwd.clone());
            }
            return Ok(outcome(trusted, TrustReason::Hook, saved));
        }
    }

    if let Some(s) = store.load()?.nearest(&cwd) {
        return Ok(outcome(s.trusted, TrustReason::Saved, Some(s.path)));
    }

    match default_project_trust(input.agent_dir) {
        DefaultTrust::Always => return Ok(outcome(true, TrustReason::DefaultSetting, None)),
        DefaultTrust::Never => return Ok(outcome(false, TrustReason::DefaultSetting, None)),
        DefaultTrust::Ask => {}
    }

    if !input.interactive {
        return Ok(outcome(false, TrustReason::NonInteractive, None));
    }

    let prompt = TrustPrompt {
        cwd: cwd.clone(),
        protected_paths: protected.clone(),
        choices: trust_choices(&cwd, true),
    };
    let answer = match input.prompter {
        Some(ask) => ask(&prompt),
        None => terminal_prompt(&prompt),
    };
    let Some(choice) = answer.and_then(|i| prompt.choices.get(i)) else {
        // Cancelled: untrusted for this run, nothing saved.
        return Ok(outcome(false, TrustReason::Prompt, None));
    };
    if !choice.updates.is_empty() {
        store.set_many(&choice.updates)?;
    }
    Ok(outcome(
        choice.trusted,
        TrustReason::Prompt,
        choice.saved_path.clone(),
    ))
}

/// The prompt as a numbered menu on stderr, answered by one line on stdin.
/// EOF, an error or anything but a listed number is a cancel.
pub fn terminal_prompt(prompt: &TrustPrompt) -> Option<usize> {
    let mut err = std::io::stderr().lock();
    let mut input = std::io::stdin().lock();
    ask_on(prompt, &mut input, &mut err)
}

/// [`terminal_prompt`] over any reader and writer (for tests).
pub fn ask_on(prompt: &TrustPrompt, input: &mut dyn BufRead, out: &mut dyn Write) -> Option<usize> {
    let _ = write_menu(prompt, out);
    let mut line = String::new();
    match input.read_line(&mut line) {
        Ok(0) | Err(_) => {
            let _ = writeln!(out);
            None
        }
        Ok(_) => {
            let n: usize = line.trim().parse().ok()?;
            (1..=prompt.choices.len()).contains(&n).then(|| n - 1)
        }
    }
}

fn write_menu(prompt: &TrustPrompt, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out, "{PROMPT_TITLE}")?;
    writeln!(out, "{}", prompt.cwd.display())?;
    writeln!(out, "{PROMPT_MESSAGE}")?;
    if !prompt.protected_paths.is_empty() {
        writeln!(out, "Found:")?;
        for p in &prompt.protected_paths {
            writeln!(out, "  {}", p.display())?;
        }
    }
    writeln!(out)?;
    for (i, c) in prompt.choices.iter().enumerate() {
        writeln!(out, "  {}) {}", i + 1, c.label)?;
    }
    write!(
        out,
        "Choose 1-{} (anything else: do not trust, this session only): ",
        prompt.choices.len()
    )?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    struct Env {
        _t: tempfile::TempDir,
        root: PathBuf,
        cwd: PathBuf,
        agent: PathBuf,
    }

    fn env(protected: bool) -> Env {
        let t = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(t.path()).unwrap();
        let cwd = root.join("w/p");
        fs::create_dir_all(cwd.join(".pi")).unwrap();
        if protected {
            fs::write(cwd.join(".pi/APPEND_SYSTEM.md"), "x").unwrap();
        }
        let agent = root.join("agent");
        fs::create_dir_all(&agent).unwrap();
        Env {
            _t: t,
            root,
            cwd,
            agent,
        }
    }

    fn run(
        e: &Env,
        cli: CliTrust,
        hook: Option<TrustHook<'_>>,
        answer: Option<Option<usize>>,
    ) -> Result<TrustOutcome, TrustError> {
        let mut asked = |_: &TrustPrompt| answer.flatten();
        decide_with(DecideInput {
            cwd: &e.cwd,
            agent_dir: &e.agent,
            home: &e.root.join("home"),
            cli,
            hook,
            interactive: answer.is_some(),
            prompter: Some(&mut asked),
        })
    }

    #[test]
    fn choices_are_pis() {
        let labels: Vec<String> = trust_choices(Path::new("/a/b"), true)
            .into_iter()
            .map(|c| c.label)
            .collect();
        assert_eq!(
            labels,
            [
                "Trust",
                "Trust parent folder (/a)",
                "Trust (this session only)",
                "Do not trust",
                "Do not trust (this session only)"
            ]
        );
        // no parent option at the root; /trust has three options
        assert_eq!(trust_choices(Path::new("/"), true).len(), 4);
        assert_eq!(trust_choices(Path::new("/a"), false).len(), 3);
    }

    #[test]
    fn prompt_answers_save_what_pi_saves() {
        let expect = [
            (0, true, Some("w/p"), "{\"w/p\": true}"),
            (1, true, Some("w"), "{\"w\": true}"),
            (2, true, None, ""),
            (3, false, Some("w/p"), "{\"w/p\": false}"),
            (4, false, None, ""),
        ];
        for (i, trusted, saved, file) in expect {
            let e = env(true);
            // a stale cwd key that "Trust parent folder" must remove
            if i == 1 {
                fs::write(
                    e.agent.join("trust.json"),
                    format!("{{\"{}\": null}}", e.cwd.display()),
                )
                .unwrap();
            }
            let out = run(&e, CliTrust::Unset, None, Some(Some(i))).unwrap();
            assert_eq!(out.trusted, trusted, "{i}");
            assert_eq!(out.reason, TrustReason::Prompt);
            assert_eq!(out.saved_path, saved.map(|s| e.root.join(s)), "{i}");
            let text = fs::read_to_string(e.agent.join("trust.json")).unwrap_or_default();
            let want = if file.is_empty() {
                String::new()
            } else {
                let v: serde_json::Value = serde_json::from_str(file).unwrap();
                let (k, val) = v.as_object().unwrap().iter().next().unwrap();
                format!("{{\n  \"{}\": {val}\n}}\n", e.root.join(k).display())
            };
            assert_eq!(text, want, "{i}");
        }
    }

    #[test]
    fn cancel_is_untrusted_and_not_saved() {
        let e = env(true);
        let out = run(&e, CliTrust::Unset, None, Some(None)).unwrap();
        assert!(!out.trusted);
        assert_eq!(out.reason, TrustReason::Prompt);
        assert!(!e.agent.join("trust.json").exists());
    }

    #[test]
    fn hook_first_and_remember_saves() {
        let e = env(true);
        let mut seen = None;
        let mut hook = |p: &Path| {
            seen = Some(p.to_path_buf());
            Some((false, true))
        };
        let out = run(&e, CliTrust::Unset, Some(&mut hook), Some(Some(0))).unwrap();
        assert_eq!(seen.as_deref(), Some(e.cwd.as_path()));
        assert_eq!((out.trusted, out.reason), (false, TrustReason::Hook));
        assert_eq!(
            fs::read_to_string(e.agent.join("trust.json")).unwrap(),
            format!("{{\n  \"{}\": false\n}}\n", e.cwd.display())
        );
        // undecided falls through to the saved decision
        let mut undecided = |_: &Path| None;
        let out = run(&e, CliTrust::Unset, Some(&mut undecided), None).unwrap();
        assert_eq!((out.trusted, out.reason), (false, TrustReason::Saved));
        assert_eq!(out.saved_path.as_deref(), Some(e.cwd.as_path()));
    }

    #[test]
    fn cli_override_never_reads_the_store() {
        let e = env(true);
        fs::write(e.agent.join("trust.json"), "{oops").unwrap();
        let out = run(&e, CliTrust::NoApprove, None, None).unwrap();
        assert_eq!((out.trusted, out.reason), (false, TrustReason::Cli));
        assert_eq!(
            out.protected_paths,
            vec![e.cwd.join(".pi/APPEND_SYSTEM.md")]
        );
        let err = run(&e, CliTrust::Unset, None, None).unwrap_err();
        assert!(err.to_string().starts_with("Failed to read trust store"));
        assert_eq!(fs::read(e.agent.join("trust.json")).unwrap(), b"{oops");
    }

    #[test]
    fn default_setting_and_interactivity() {
        let e = env(true);
        for (setting, want) in [
            ("\"always\"", Some(true)),
            ("\"never\"", Some(false)),
            ("\"ask\"", None),
            ("\"Always\"", None),
            ("true", None),
        ] {
            fs::write(
                e.agent.join("settings.json"),
                format!("{{\"defaultProjectTrust\": {setting}}}"),
            )
            .unwrap();
            let out = run(&e, CliTrust::Unset, None, None).unwrap();
            match want {
                Some(t) => assert_eq!((out.trusted, out.reason), (t, TrustReason::DefaultSetting)),
                None => assert_eq!(
                    (out.trusted, out.reason),
                    (false, TrustReason::NonInteractive)
                ),
            }
        }
        // a project setting is ignored
        fs::write(e.agent.join("settings.json"), "{}").unwrap();
        fs::write(
            e.cwd.join(".pi/settings.json"),
            "{\"defaultProjectTrust\": \"always\"}",
        )
        .unwrap();
        let out = run(&e, CliTrust::Unset, None, None).unwrap();
        assert_eq!(out.reason, TrustReason::NonInteractive);
    }

    #[test]
    fn terminal_menu_reads_one_line() {
        let prompt = TrustPrompt {
            cwd: "/a/b".into(),
            protected_paths: vec!["/a/b/.pi/prompts".into()],
            choices: trust_choices(Path::new("/a/b"), true),
        };
        let mut out = Vec::new();
        assert_eq!(ask_on(&prompt, &mut &b"2\n"[..], &mut out), Some(1));
        let shown = String::from_utf8(out).unwrap();
        assert!(shown.starts_with("Trust project folder?\n/a/b\nThis allows pi"));
        assert!(shown.contains("  2) Trust parent folder (/a)\n"));
        assert!(shown.contains("  5) Do not trust (this session only)\n"));
        for bad in [&b""[..], b"\n", b"0\n", b"6\n", b"yes\n"] {
            assert_eq!(ask_on(&prompt, &mut &bad[..], &mut Vec::new()), None);
        }
    }
}
