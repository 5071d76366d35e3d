//! `pi-session` — inspect and edit pi session files. Thin client of
//! `pi_lib::session`: parse arguments, call the library, print records.

mod agents;
mod cli;
mod compact;
mod edit;
mod inspect;
mod list;
mod out;

use std::path::PathBuf;

use clap::CommandFactory;
use pi_lib::cli::{report, CliError, EXIT_OK};
use pi_lib::session::{resolve, Session};

use cli::{Cli, Command};

const PROG: &str = "pi-session";

fn main() {
    let cli: Cli = pi_lib::cli::parse_or_exit(PROG, std::env::args_os());
    let code = match run(cli) {
        Ok(code) => code,
        Err(e) if e.code == 0 => 0,
        Err(e) => report(PROG, &e),
    };
    std::process::exit(code);
}

fn run(cli: Cli) -> Result<i32, CliError> {
    if let Some(what) = cli.generate {
        let mut stdout = pi_lib::cli::Stdout::new();
        pi_lib::cli::generate(Cli::command(), what, &mut stdout).map_err(out::io_err)?;
        stdout.finish()?;
        return Ok(EXIT_OK);
    }
    let Some(command) = cli.command else {
        let _ = Cli::command().print_help();
        return Ok(pi_lib::cli::EXIT_USAGE);
    };
    // Only `stats --all` reads more than one folder.
    let many = matches!(command, Command::Stats { all: true, .. });
    if cli.session_dir.len() > 1 && !many {
        return Err(CliError::input(
            "--session-dir: given more than once (only `stats --all` reads many folders)",
        ));
    }
    let ctx = Ctx {
        session_dir: cli.session_dir.first().cloned(),
        session_dirs: cli.session_dir,
    };
    match command {
        Command::Ls {
            all,
            cwd,
            sort,
            limit,
            format,
        } => list::ls(&ctx, all, cwd, sort, limit, format.format),
        Command::Show { session, format } => {
            inspect::show(&ctx.load(&session.session)?, format.format)
        }
        Command::Tree { session, format } => {
            inspect::tree(&ctx.load(&session.session)?, format.format)
        }
        Command::Context {
            session,
            leaf,
            prompt,
            format,
        } => {
            let s = ctx.load(&session.session)?;
            if prompt {
                inspect::prompt(&s, leaf.as_deref(), format.format)
            } else {
                inspect::context(&s, leaf.as_deref(), format.format)
            }
        }
        Command::Search {
            text,
            all,
            ignore_case,
            session,
            limit,
            format,
        } => list::search(
            &ctx,
            &text,
            all,
            ignore_case,
            &session,
            limit,
            format.format,
        ),
        Command::Stats {
            session: Some(session),
            format,
            ..
        } => inspect::stats(&ctx.load(&session)?, format.format),
        Command::Stats { by, format, .. } => list::stats_all(&ctx, by, format.format),
        Command::Agents { session, format } => {
            agents::agents(&ctx, &ctx.load(&session.session)?, format.format)
        }
        Command::Fork {
            session,
            at,
            format,
        } => edit::fork(&ctx.load(&session.session)?, at.as_deref(), format.format),
        Command::Branch {
            session,
            to,
            summary,
            summarize,
            instructions,
            model,
            format,
        } => {
            let s = ctx.load(&session.session)?;
            if summarize {
                let target = s.find_entry(&to).map_err(CliError::input)?.id().to_string();
                compact::branch_summarize(s, &target, instructions, model, format.format)
            } else {
                edit::branch(s, &to, summary, format.format)
            }
        }
        Command::Compact {
            session,
            keep_recent_tokens,
            instructions,
            model,
            dry_run,
            format,
        } => {
            if dry_run {
                let path = ctx.resolve(&session.session)?;
                if let Some(code) = compact::dry_run_fast(&path, keep_recent_tokens, format.format)?
                {
                    return Ok(code);
                }
            }
            compact::compact(
                ctx.load(&session.session)?,
                keep_recent_tokens,
                instructions,
                model,
                dry_run,
                format.format,
            )
        }
        Command::Label {
            session,
            entry,
            label,
            clear: _,
            format,
        } => edit::label(ctx.load(&session.session)?, &entry, label, format.format),
        Command::Name {
            session,
            name,
            format,
        } => edit::name(ctx.load(&session.session)?, &name, format.format),
        Command::Export {
            session,
            format,
            output,
        } => edit::export(&ctx.load(&session.session)?, format, output),
        Command::SelectTool {
            session,
            tools,
            chat_only,
            clear,
            format,
        } => {
            let change = if clear {
                Some(None)
            } else if chat_only {
                Some(Some(Vec::new()))
            } else {
                tools.map(Some)
            };
            edit::select_tool(ctx.load(&session.session)?, change, format.format)
        }
        Command::Migrate { session, format } => {
            edit::migrate(&ctx, &session.session, format.format)
        }
    }
}

/// Options shared by every subcommand.
pub struct Ctx {
    pub session_dir: Option<PathBuf>,
    /// Every `--session-dir` (`stats --all`).
    pub session_dirs: Vec<PathBuf>,
}

impl Ctx {
    /// Folders searched for session files and id prefixes.
    pub fn roots(&self) -> Vec<PathBuf> {
        resolve::roots(self.session_dir.as_deref())
    }

    /// Resolves a session reference to a path.
    pub fn resolve(&self, reference: &str) -> Result<PathBuf, CliError> {
        let p = std::path::Path::new(reference);
        if p.is_dir() {
            return Err(CliError::input(format!(
                "{reference}: is a directory, not a session file"
            ))
            .with_hint("use `pi-session ls --session-dir DIR` to list the sessions in a folder"));
        }
        resolve::resolve(reference, &self.roots(), &mut |skip| {
            pi_lib::cli::warn(PROG, &skip.to_string())
        })
        .map_err(|e| CliError::input(e.to_string()))
    }

    /// Resolves and loads a session, printing its damage warnings.
    pub fn load(&self, reference: &str) -> Result<Session, CliError> {
        let path = self.resolve(reference)?;
        let s = Session::load(&path).map_err(|e| CliError::input(e.to_string()))?;
        s.diagnostics.warn(PROG);
        Ok(s)
    }
}
