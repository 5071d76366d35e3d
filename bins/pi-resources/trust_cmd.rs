//! `pi-resources trust`: show and change the saved project-trust decisions
//! in `<agentDir>/trust.json` — the command-line face of pi's `/trust`.
//!
//! Everything is done by `pi_lib::trust` (same file, same bytes, same lock
//! as the real pi); this module only parses the arguments, picks the
//! directory and prints one record. A corrupt trust.json is reported with
//! its path and exit status 2 and is never rewritten.

use std::io::Write;
use std::path::{Path, PathBuf};

use pi_lib::cli::{CliError, OutputFormat, EXIT_OK};
use pi_lib::trust::{
    canonicalize_dir, decide_with, default_project_trust, CliTrust, DecideInput, DefaultTrust,
    SavedDecision, TrustError, TrustOutcome, TrustReason, TrustStore, TrustUpdate,
};
use serde_json::json;

/// Show or change the saved project-trust decision for a folder.
///
/// pi loads a project's `.pi/` settings, extensions, skills, prompt
/// templates, themes, SYSTEM.md / APPEND_SYSTEM.md, MCP config and
/// `.agents/skills` only once the folder is trusted. Decisions saved here
/// (in `<agentDir>/trust.json`, shared with pi's `/trust`) apply to the
/// folder and every folder below it; the nearest saved decision wins.
///
/// ACTION is one of: `show` (default) — the saved decision, whether the
/// folder has protected resources, and what a non-interactive run (`pi -p`,
/// `pi-run` without -a/-na) would decide; `allow` — save "trusted" for DIR;
/// `deny` — save "not trusted" for DIR; `forget` — remove DIR's own saved
/// decision (an ancestor's may then apply). A first argument that is not an
/// action is taken as DIR (`pi-resources trust ../x`). Changes take effect
/// for pi sessions started afterwards.
#[derive(Debug, Clone, clap::Args)]
#[command(after_long_help = AFTER_HELP)]
pub struct TrustArgs {
    /// show (default), allow, deny or forget.
    ///
    /// show: the saved decision (and which trust.json key gave it), whether
    /// the folder has protected resources, and what a non-interactive run
    /// (`pi -p`, `pi-run` without -a/-na) would decide. allow: save
    /// "trusted" for DIR. deny: save "not trusted" for DIR. forget: remove
    /// DIR's own saved decision (an ancestor's may then apply). A first
    /// argument that is not an action is taken as DIR.
    #[arg(value_name = "ACTION")]
    pub action: Option<String>,

    /// The project folder; default: the current directory.
    #[arg(value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
    pub dir: Option<PathBuf>,

    /// Act on DIR's parent folder instead, like pi's "Trust parent folder"
    /// choice: allow/deny also remove DIR's own saved decision, so the
    /// parent's applies to DIR.
    #[arg(long)]
    pub parent: bool,
}

const AFTER_HELP: &str = "\
Examples:
  pi-resources trust                      what pi would decide here
  pi-resources trust allow                trust the current folder
  pi-resources trust allow --parent       trust the folder above (and all below it)
  pi-resources trust deny ~/src/untrusted
  pi-resources trust forget
  pi-resources trust --format jsonl | jq .trusted

Output: text on a terminal; otherwise one JSONL record
  {\"type\":\"trust\",\"action\",\"path\",\"trusted\",\"reason\",\"protectedPaths\",
   \"saved\":{\"path\",\"trusted\"}|null,\"savedHere\",\"defaultProjectTrust\",\"store\"}
`trusted`/`reason` are the non-interactive decision (no -a/-na, no extension).

Exit status:
  0  done
  1  trust.json is locked by another process or cannot be written
  2  bad DIR or ACTION, or trust.json is unreadable or invalid (it is never rewritten)

Environment:
  PI_CODING_AGENT_DIR  the agent directory holding trust.json (default ~/.pi/agent)";

/// What to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Show,
    Allow,
    Deny,
    Forget,
}

impl Action {
    fn parse(s: &str) -> Option<Action> {
        match s {
            "show" => Some(Action::Show),
            "allow" => Some(Action::Allow),
            "deny" => Some(Action::Deny),
            "forget" => Some(Action::Forget),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Action::Show => "show",
            Action::Allow => "allow",
            Action::Deny => "deny",
            Action::Forget => "forget",
        }
    }
}

/// Runs `pi-resources trust …` with the real agent dir, `$HOME`, current
/// directory and stdout.
pub fn run(args: TrustArgs, format: Option<OutputFormat>) -> Result<i32, CliError> {
    let format = pi_lib::cli::resolve_format(format);
    let agent_dir = pi_lib::paths::agent_dir();
    let home = pi_lib::paths::home_dir();
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::input(format!("cannot read the current directory: {e}")))?;
    let env = Env {
        agent_dir: &agent_dir,
        home: &home,
        cwd: &cwd,
    };
    let mut out = pi_lib::cli::Stdout::new();
    let code = run_in(&args, format, &env, &mut out)?;
    out.finish()?;
    Ok(code)
}

/// Where the command runs (explicit, for tests).
struct Env<'a> {
    agent_dir: &'a Path,
    home: &'a Path,
    cwd: &'a Path,
}

fn run_in(
    args: &TrustArgs,
    format: OutputFormat,
    env: &Env<'_>,
    out: &mut dyn Write,
) -> Result<i32, CliError> {
    let (action, dir) = match args.action.as_deref() {
        None => (Action::Show, args.dir.clone()),
        Some(a) => match Action::parse(a) {
            Some(action) => (action, args.dir.clone()),
            None if args.dir.is_none() => (Action::Show, Some(PathBuf::from(a))),
            None => {
                return Err(CliError::input(format!(
                    "unknown action '{a}' (expected show, allow, deny or forget)"
                )))
            }
        },
    };
    let dir = resolve_dir(dir.as_deref(), env.cwd)?;
    let target = if args.parent {
        match dir.parent() {
            Some(p) => p.to_path_buf(),
            None => {
                return Err(CliError::input(format!(
                    "{} has no parent folder",
                    dir.display()
                )))
            }
        }
    } else {
        dir.clone()
    };
    let store = TrustStore::in_agent_dir(env.agent_dir);

    let updates = match action {
        Action::Show => Vec::new(),
        Action::Allow | Action::Deny => {
            let mut u = vec![TrustUpdate::set(&target, action == Action::Allow)];
            if args.parent {
                u.push(TrustUpdate::remove(&dir));
            }
            u
        }
        Action::Forget => vec![TrustUpdate::remove(&target)],
    };
    if !updates.is_empty() {
        store.set_many(&updates).map_err(store_error)?;
    }

    let report = Report::gather(action, &target, &store, env)?;
    let written = match format {
        OutputFormat::Jsonl => report.write_jsonl(out),
        OutputFormat::Text => report.write_text(out),
    };
    written.map_err(pi_lib::cli::stdout_error)?;
    Ok(EXIT_OK)
}

/// DIR (relative to `cwd`, `~` expanded), which must be an existing
/// folder, canonicalized.
fn resolve_dir(dir: Option<&Path>, cwd: &Path) -> Result<PathBuf, CliError> {
    let raw = match dir {
        Some(d) => pi_lib::paths::expand_tilde(d),
        None => cwd.to_path_buf(),
    };
    let abs = if raw.is_absolute() {
        raw
    } else {
        cwd.join(raw)
    };
    match std::fs::metadata(&abs) {
        Ok(m) if m.is_dir() => Ok(canonicalize_dir(&abs)),
        Ok(_) => Err(CliError::input(format!(
            "not a directory: {}",
            abs.display()
        ))),
        Err(e) => Err(CliError::input(format!("{}: {e}", abs.display()))),
    }
}

/// A trust-store error for the user: a corrupt or unreadable file is an
/// input error (2) and stays untouched; a held lock or failed write is 1.
fn store_error(e: TrustError) -> CliError {
    match &e {
        TrustError::Lock { path, .. } => CliError::failed(e.to_string()).with_hint(format!(
            "if no pi or pi-resources is running, remove {}",
            path.display()
        )),
        TrustError::Write { .. } | TrustError::Message(_) => CliError::failed(e.to_string()),
        _ if e.is_corrupt_store() => CliError::input(e.to_string())
            .with_hint("fix or remove the file by hand; it is never rewritten while it is invalid"),
        _ => CliError::input(e.to_string()),
    }
}

/// Everything the command says about one folder.
struct Report {
    action: Action,
    path: PathBuf,
    store: PathBuf,
    saved: Option<SavedDecision>,
    saved_here: Option<bool>,
    default_trust: DefaultTrust,
    outcome: TrustOutcome,
}

impl Report {
    fn gather(
        action: Action,
        target: &Path,
        store: &TrustStore,
        env: &Env<'_>,
    ) -> Result<Report, CliError> {
        let entries = store.load().map_err(store_error)?;
        let outcome = decide_with(DecideInput {
            cwd: target,
            agent_dir: env.agent_dir,
            home: env.home,
            cli: CliTrust::Unset,
            hook: None,
            interactive: false,
            prompter: None,
        })
        .map_err(store_error)?;
        Ok(Report {
            action,
            path: target.to_path_buf(),
            store: store.path().to_path_buf(),
            saved: entries.nearest(target),
            saved_here: entries.exact(target),
            default_trust: default_project_trust(env.agent_dir),
            outcome,
        })
    }

    fn write_jsonl(&self, out: &mut dyn Write) -> std::io::Result<()> {
        let rec = json!({
            "type": "trust",
            "action": self.action.name(),
            "path": self.path,
            "trusted": self.outcome.trusted,
            "reason": self.outcome.reason,
            "protectedPaths": self.outcome.protected_paths,
            "saved": self.saved.as_ref().map(|s| json!({"path": s.path, "trusted": s.trusted})),
            "savedHere": self.saved_here,
            "defaultProjectTrust": self.default_trust,
            "store": self.store,
        });
        writeln!(out, "{rec}")
    }

    fn write_text(&self, out: &mut dyn Write) -> std::io::Result<()> {
        match self.action {
            Action::Show => {}
            Action::Forget => writeln!(
                out,
                "Removed the saved decision for {}. Restart pi for this to take effect.\n",
                self.path.display()
            )?,
            Action::Allow | Action::Deny => writeln!(
                out,
                "Saved trust decision: {} ({}). Restart pi for this to take effect.\n",
                if self.action == Action::Allow {
                    "trusted"
                } else {
                    "untrusted"
                },
                self.path.display()
            )?,
        }
        writeln!(out, "{}", self.path.display())?;
        let saved = match &self.saved {
            None => "none".to_string(),
            Some(s) => {
                let word = if s.trusted { "trusted" } else { "untrusted" };
                if s.path == self.path {
                    format!("{word} ({})", s.path.display())
                } else {
                    format!("{word} (inherited from {})", s.path.display())
                }
            }
        };
        writeln!(out, "  Saved decision:  {saved}")?;
        let protected = if self.outcome.protected_paths.is_empty() {
            "none (nothing here needs a decision)".to_string()
        } else {
            self.outcome
                .protected_paths
                .iter()
                .map(|p| match p.strip_prefix(&self.path) {
                    Ok(rel) => rel.display().to_string(),
                    Err(_) => p.display().to_string(),
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        writeln!(out, "  Protected:       {protected}")?;
        let verdict = if self.outcome.trusted {
            "trusted"
        } else {
            "untrusted"
        };
        let why = match self.outcome.reason {
            TrustReason::NoProtectedResources => "nothing needs a decision".to_string(),
            TrustReason::Saved => "saved decision".to_string(),
            TrustReason::DefaultSetting => {
                format!("defaultProjectTrust: {}", default_name(self.default_trust))
            }
            TrustReason::NonInteractive => "nothing decided; an interactive pi would ask".into(),
            TrustReason::Cli | TrustReason::Hook | TrustReason::Prompt => String::new(),
        };
        writeln!(out, "  Non-interactive: {verdict} ({why})")?;
        writeln!(
            out,
            "  Default:         {} (defaultProjectTrust in the agent settings)",
            default_name(self.default_trust)
        )?;
        writeln!(out, "  Store:           {}", self.store.display())
    }
}

fn default_name(d: DefaultTrust) -> &'static str {
    match d {
        DefaultTrust::Ask => "ask",
        DefaultTrust::Always => "always",
        DefaultTrust::Never => "never",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[derive(clap::Parser)]
    struct Top {
        #[command(flatten)]
        t: TrustArgs,
    }

    struct Fx {
        _t: tempfile::TempDir,
        root: PathBuf,
        agent: PathBuf,
        proj: PathBuf,
    }

    fn fx() -> Fx {
        let t = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(t.path()).unwrap();
        let proj = root.join("w/proj");
        fs::create_dir_all(proj.join(".pi/extensions")).unwrap();
        let agent = root.join("agent");
        Fx {
            _t: t,
            root,
            agent,
            proj,
        }
    }

    fn cmd(f: &Fx, argv: &[&str]) -> (Result<i32, CliError>, String) {
        use clap::Parser;
        let mut full = vec!["trust"];
        full.extend_from_slice(argv);
        let top = Top::try_parse_from(full).unwrap();
        let mut out = Vec::new();
        let home = f.root.join("home");
        let env = Env {
            agent_dir: &f.agent,
            home: &home,
            cwd: &f.proj,
        };
        let r = run_in(&top.t, OutputFormat::Jsonl, &env, &mut out);
        (r, String::from_utf8(out).unwrap())
    }

    fn record(s: &str) -> serde_json::Value {
        serde_json::from_str(s.trim()).unwrap()
    }

    #[test]
    fn show_allow_deny_forget() {
        let f = fx();
        let (r, out) = cmd(&f, &[]);
        assert_eq!(r.unwrap(), 0);
        let v = record(&out);
        assert_eq!(v["type"], "trust");
        assert_eq!(v["action"], "show");
        assert_eq!(v["trusted"], false);
        assert_eq!(v["reason"], "non_interactive");
        assert_eq!(v["saved"], serde_json::Value::Null);
        assert_eq!(
            v["protectedPaths"][0],
            f.proj.join(".pi/extensions").display().to_string()
        );

        let (r, out) = cmd(&f, &["allow"]);
        assert_eq!(r.unwrap(), 0);
        let v = record(&out);
        assert_eq!(v["trusted"], true);
        assert_eq!(v["reason"], "saved");
        assert_eq!(v["savedHere"], true);
        assert_eq!(
            fs::read_to_string(f.agent.join("trust.json")).unwrap(),
            format!("{{\n  \"{}\": true\n}}\n", f.proj.display())
        );

        let (_, out) = cmd(&f, &["deny", "--parent"]);
        let v = record(&out);
        assert_eq!(v["path"], f.root.join("w").display().to_string());
        assert_eq!(v["trusted"], false);
        // the folder's own key is gone, so the parent's decision applies
        let (_, out) = cmd(&f, &["show"]);
        let v = record(&out);
        assert_eq!(v["saved"]["path"], f.root.join("w").display().to_string());
        assert_eq!(v["savedHere"], serde_json::Value::Null);
        assert_eq!(v["trusted"], false);

        let (_, out) = cmd(&f, &["forget", "--parent"]);
        assert_eq!(record(&out)["saved"], serde_json::Value::Null);
        assert_eq!(
            fs::read_to_string(f.agent.join("trust.json")).unwrap(),
            "{}\n"
        );
    }

    #[test]
    fn dir_argument_and_errors() {
        let f = fx();
        let other = f.root.join("plain");
        fs::create_dir(&other).unwrap();
        // a first argument that is no action is DIR
        let (r, out) = cmd(&f, &[other.to_str().unwrap()]);
        assert_eq!(r.unwrap(), 0);
        let v = record(&out);
        assert_eq!(v["reason"], "no_protected_resources");
        assert_eq!(v["trusted"], true);
        let (r, _) = cmd(&f, &["frobnicate", "x"]);
        assert_eq!(r.unwrap_err().code, 2);
        let (r, _) = cmd(&f, &["show", "/definitely/not/here"]);
        assert_eq!(r.unwrap_err().code, 2);
        fs::write(f.root.join("file"), "x").unwrap();
        let (r, _) = cmd(&f, &["allow", f.root.join("file").to_str().unwrap()]);
        assert_eq!(r.unwrap_err().code, 2);
        assert!(!f.agent.join("trust.json").exists());
    }

    #[test]
    fn corrupt_store_exits_2_and_is_untouched() {
        let f = fx();
        fs::create_dir_all(&f.agent).unwrap();
        let bad = b"{\"/x\": \"yes\"}";
        fs::write(f.agent.join("trust.json"), bad).unwrap();
        for argv in [&[][..], &["allow"], &["forget", "--parent"]] {
            let (r, out) = cmd(&f, argv);
            let e = r.unwrap_err();
            assert_eq!(e.code, 2);
            assert!(
                e.message.starts_with("Invalid trust store "),
                "{}",
                e.message
            );
            assert!(e
                .message
                .contains(&f.agent.join("trust.json").display().to_string()));
            assert!(out.is_empty());
            assert_eq!(fs::read(f.agent.join("trust.json")).unwrap(), bad);
        }
    }

    #[test]
    fn text_output() {
        let f = fx();
        let mut out = Vec::new();
        let env = Env {
            agent_dir: &f.agent,
            home: &f.root,
            cwd: &f.proj,
        };
        let args = TrustArgs {
            action: Some("allow".into()),
            dir: None,
            parent: true,
        };
        run_in(&args, OutputFormat::Text, &env, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with(&format!(
                "Saved trust decision: trusted ({}). Restart pi",
                f.root.join("w").display()
            )),
            "{text}"
        );
        assert!(text.contains("  Saved decision:  trusted ("), "{text}");
    }

    #[test]
    fn clap_definition_is_valid() {
        <Top as clap::CommandFactory>::command().debug_assert();
    }
}
