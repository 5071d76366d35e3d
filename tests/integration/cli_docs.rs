//! Documentation stays true: committed man pages equal what the clap
//! definitions render (regenerate with `UPDATE_DOCS=1 cargo test --test
//! integration cli_docs`), completions render, `--help` shows examples.

use crate::common::*;

const BINS: &[&str] = &["pi-session", "pi-run", "pi-prompt", "pi-resources"];

#[test]
fn man_pages_are_current() {
    let sb = Sandbox::new();
    let mut stale = Vec::new();
    for b in BINS {
        let out = sb.cmd(b).args(["--generate", "man"]).output().unwrap();
        let page = ok(&out);
        assert!(page.contains(".TH"), "{b}: not a man page");
        let path = repo().join("man").join(format!("{b}.1"));
        if std::env::var_os("UPDATE_DOCS").is_some() {
            std::fs::write(&path, &page).unwrap();
            continue;
        }
        if std::fs::read_to_string(&path).ok().as_deref() != Some(page.as_str()) {
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "stale man pages (run UPDATE_DOCS=1 cargo test --test integration cli_docs): {stale:?}"
    );
}

#[test]
fn completions_render() {
    let sb = Sandbox::new();
    for b in BINS {
        for shell in ["complete-bash", "complete-zsh", "complete-fish"] {
            let out = sb.cmd(b).args(["--generate", shell]).output().unwrap();
            assert!(ok(&out).contains(b), "{b} {shell}");
        }
    }
    let bash = ok(&sb
        .cmd("pi-session")
        .args(["--generate", "complete-bash"])
        .output()
        .unwrap());
    assert!(bash.contains("select-tool") && bash.contains("--chat-only"));
}

#[test]
fn help_has_examples_and_exit_codes() {
    let sb = Sandbox::new();
    let help = ok(&sb.session(&["--help"]));
    assert!(help.contains("Examples:") && help.contains("Exit status:"));
    for sub in [
        "ls",
        "show",
        "tree",
        "context",
        "search",
        "stats",
        "fork",
        "branch",
        "label",
        "name",
        "export",
        "select-tool",
        "migrate",
    ] {
        ok(&sb.session(&[sub, "--help"]));
    }
    let run_help = ok(&sb.cmd("pi-run").arg("--help").output().unwrap());
    assert!(run_help.contains("Examples:") && run_help.contains("Exit status:"));
    let res_help = ok(&sb.cmd("pi-resources").arg("--help").output().unwrap());
    assert!(res_help.contains("Examples:") && res_help.contains("Exit status:"));
    let prompt_help = ok(&sb.cmd("pi-prompt").arg("--help").output().unwrap());
    assert!(prompt_help.contains("Examples:") && prompt_help.contains("Exit status:"));
    for sub in ["system", "expand", "diff"] {
        ok(&sb.cmd("pi-prompt").args([sub, "--help"]).output().unwrap());
    }
}

/// The man pages put the `Examples:`, `Exit status:` and `Environment:`
/// paragraphs of the help text under EXAMPLES, EXIT STATUS and
/// ENVIRONMENT, not all of it under NOTES.
#[test]
fn man_pages_have_examples_and_exit_status_sections() {
    let sb = Sandbox::new();
    for b in BINS {
        let page = ok(&sb.cmd(b).args(["--generate", "man"]).output().unwrap());
        let section = |title: &str| {
            let start = page
                .find(&format!(".SH {title}\n"))
                .unwrap_or_else(|| panic!("{b}: no {title} section"));
            let rest = &page[start + 1..];
            rest[..rest.find("\n.SH ").unwrap_or(rest.len())].to_string()
        };
        let examples = section("EXAMPLES");
        assert!(
            examples.contains(&b.replace('-', "\\-")),
            "{b}: EXAMPLES shows no command:\n{examples}"
        );
        let exit = section("EXIT STATUS");
        assert!(exit.contains("\n  0 "), "{b}: EXIT STATUS:\n{exit}");
        if page.contains(".SH NOTES\n") {
            let notes = section("NOTES");
            assert!(
                !notes.contains("Examples:") && !notes.contains("Exit status:"),
                "{b}: examples or exit status left under NOTES:\n{notes}"
            );
        }
    }
}

/// `--generate` is how completions and man pages are installed, so
/// `--help` names it.
#[test]
fn help_names_generate() {
    let sb = Sandbox::new();
    for b in BINS {
        let help = ok(&sb.cmd(b).arg("--help").output().unwrap());
        assert!(
            help.contains("--generate <WHAT>") && help.contains("complete-bash"),
            "{b} --help does not show --generate:\n{help}"
        );
    }
}
