//! `--generate` (listed in every `--help`): a binary's man page (the usual
//! sections, every subcommand, and the help text's examples, exit status
//! and environment as sections of their own) and its bash, zsh and fish
//! completions (bash's repaired for hyphenated program names).

use std::io::Write;

/// What `--generate` can render.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Generate {
    /// roff man page on stdout.
    Man,
    /// bash completion script.
    CompleteBash,
    /// zsh completion script.
    CompleteZsh,
    /// fish completion script.
    CompleteFish,
}

/// Renders a man page or completion script for `cmd` to `out`.
pub fn generate(
    mut cmd: clap::Command,
    what: Generate,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let name = cmd.get_name().to_string();
    match what {
        Generate::Man => render_man(cmd, out),
        Generate::CompleteBash => {
            let mut script = Vec::new();
            clap_complete::generate(
                clap_complete::Shell::Bash,
                &mut cmd,
                name.clone(),
                &mut script,
            );
            out.write_all(fix_bash_completion(&String::from_utf8_lossy(&script), &name).as_bytes())
        }
        Generate::CompleteZsh => {
            clap_complete::generate(clap_complete::Shell::Zsh, &mut cmd, name, out);
            Ok(())
        }
        Generate::CompleteFish => {
            clap_complete::generate(clap_complete::Shell::Fish, &mut cmd, name, out);
            Ok(())
        }
    }
}

/// Repairs clap_complete's bash script for a program whose name holds a
/// `-`. The script walks the words typed into a state named after the
/// program with `-` made `__` (`pi__session__subcmd__ls`), but it names
/// the `case` arms that offer each subcommand's options with `-` made
/// `__subcmd__` (`pi__subcmd__session__subcmd__ls`), so no arm ever
/// matches and subcommand options are never completed. The arms are
/// renamed to the state names.
fn fix_bash_completion(script: &str, bin: &str) -> String {
    if !bin.contains('-') {
        return script.to_string();
    }
    let wrong = bin.replace('-', "__subcmd__");
    let right = bin.replace('-', "__");
    script
        .lines()
        .map(|line| {
            let body = line.trim_start();
            let indent = &line[..line.len() - body.len()];
            match body.strip_prefix(&wrong) {
                Some(rest)
                    if rest.ends_with(')') && (rest == ")" || rest.starts_with("__subcmd__")) =>
                {
                    format!("{indent}{right}{rest}\n")
                }
                _ => format!("{line}\n"),
            }
        })
        .collect()
}

/// Escapes text for roff.
fn roff(s: &str) -> String {
    let mut out = s.replace('\\', "\\e").replace('-', "\\-");
    if out.starts_with('.') || out.starts_with('\'') {
        out.insert_str(0, "\\&");
    }
    out
}

/// Renders one man page for a command and all its subcommands: the usual
/// sections from clap_mangen, a COMMANDS section with every subcommand's
/// usage and options, and the after-help text (examples, exit status,
/// environment) verbatim.
pub fn render_man(mut cmd: clap::Command, out: &mut dyn Write) -> std::io::Result<()> {
    cmd.build();
    let man = clap_mangen::Man::new(cmd.clone());
    man.render_title(out)?;
    man.render_name_section(out)?;
    man.render_synopsis_section(out)?;
    man.render_description_section(out)?;
    man.render_options_section(out)?;
    let name = cmd.get_name().to_string();
    let subs: Vec<&clap::Command> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        .collect();
    if !subs.is_empty() {
        writeln!(out, ".SH COMMANDS")?;
        for sub in subs {
            let mut sub = sub.clone();
            let usage = sub.render_usage().to_string();
            let usage = usage.trim_start_matches("Usage: ").to_string();
            writeln!(out, ".SS \"{} {}\"", name, sub.get_name())?;
            writeln!(out, "\\fB{}\\fR", roff(&usage))?;
            if let Some(about) = sub.get_long_about().or(sub.get_about()) {
                writeln!(out, ".PP")?;
                writeln!(out, "{}", roff(&about.to_string()))?;
            }
            for arg in sub
                .get_arguments()
                .filter(|a| !a.is_hide_set() && a.get_id() != "help")
            {
                let mut flag = Vec::new();
                if let Some(s) = arg.get_short() {
                    flag.push(format!("\\fB\\-{s}\\fR"));
                }
                if let Some(l) = arg.get_long() {
                    flag.push(format!("\\fB\\-\\-{}\\fR", roff(l)));
                }
                let value = arg
                    .get_value_names()
                    .map(|v| {
                        v.iter()
                            .map(|n| format!("<{n}>"))
                            .collect::<Vec<_>>()
                            .join(" ")
                    })
                    .unwrap_or_default();
                let takes_value = arg.get_num_args().is_some_and(|n| n.takes_values());
                let head = if flag.is_empty() {
                    format!(
                        "\\fI{}\\fR",
                        roff(&format!("<{}>", arg.get_id()).to_uppercase())
                    )
                } else if takes_value {
                    format!(
                        "{} {}",
                        flag.join(", "),
                        roff(if value.is_empty() { "<VALUE>" } else { &value })
                    )
                } else {
                    flag.join(", ")
                };
                writeln!(out, ".TP")?;
                writeln!(out, "{head}")?;
                let mut help = arg
                    .get_long_help()
                    .or(arg.get_help())
                    .map(|h| h.to_string())
                    .unwrap_or_default();
                let values: Vec<String> = arg
                    .get_possible_values()
                    .iter()
                    .filter(|v| !v.is_hide_set())
                    .map(|v| v.get_name().to_string())
                    .collect();
                if !values.is_empty() && takes_value {
                    help.push_str(&format!(" [possible values: {}]", values.join(", ")));
                }
                writeln!(out, "{}", roff(&help))?;
            }
            if let Some(after) = sub.get_after_long_help().or(sub.get_after_help()) {
                writeln!(out, ".PP")?;
                verbatim(&after.to_string(), out)?;
            }
        }
    }
    if let Some(after) = cmd.get_after_long_help().or(cmd.get_after_help()) {
        let sections = after_help_sections(&after.to_string());
        // man-pages(7) order: EXIT STATUS, ENVIRONMENT, NOTES, EXAMPLES.
        for title in ["EXIT STATUS", "ENVIRONMENT", "NOTES", "EXAMPLES"] {
            let text: Vec<&str> = sections
                .iter()
                .filter(|(t, _)| *t == title)
                .map(|(_, body)| body.as_str())
                .collect();
            if text.is_empty() {
                continue;
            }
            writeln!(out, ".SH {title}")?;
            verbatim(&text.join("\n\n"), out)?;
        }
    }
    man.render_version_section(out)
}

/// The after-help text split into man page sections: each blank-line
/// separated paragraph that opens with `Examples:`, `Exit status:` or
/// `Environment:` goes (without that heading word; the rest of its line
/// stays) to EXAMPLES, EXIT STATUS or ENVIRONMENT; every other paragraph
/// to NOTES. `--help` shows the same
/// text in one piece.
fn after_help_sections(after: &str) -> Vec<(&'static str, String)> {
    let mut sections: Vec<(&'static str, String)> = Vec::new();
    for para in after.split("\n\n") {
        let para = para.trim_matches('\n');
        if para.is_empty() {
            continue;
        }
        let (head, rest) = para.split_once('\n').unwrap_or((para, ""));
        let Some((title, tail)) = [
            ("Examples:", "EXAMPLES"),
            ("Exit status:", "EXIT STATUS"),
            ("Environment:", "ENVIRONMENT"),
        ]
        .iter()
        .find_map(|(h, t)| Some((*t, head.trim_end().strip_prefix(h)?.trim()))) else {
            sections.push(("NOTES", para.to_string()));
            continue;
        };
        // A heading line may go on ("Exit status: one table for …"): that
        // rest of the line opens the section.
        let body = match tail.chars().next() {
            None => rest.to_string(),
            Some(first) => format!(
                "{}{}\n{rest}",
                first.to_uppercase(),
                &tail[first.len_utf8()..]
            ),
        };
        sections.push((title, body));
    }
    sections
}

/// Writes text as a no-fill roff block (lines kept as written).
fn verbatim(text: &str, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out, ".nf")?;
    for line in text.lines() {
        writeln!(out, "{}", roff(line))?;
    }
    writeln!(out, ".fi")
}
