//! `pi-run --sandbox`: every escape a model-chosen command or file tool
//! could try, tried for real on this kernel through pi-run (the faux
//! provider scripts the calls; a loopback server plays a parent and its
//! subagent child). Each fails under the sandbox and succeeds in a control
//! run without it, so the tests show the sandbox is what stops them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{json, Value};

use crate::common::*;

/// The secret every credential file holds (with its index appended).
const SECRET: &str = "SECRET-";

/// A workspace (a git work tree, the cwd), a home full of credentials, an
/// agent dir with pi's token files, a temp dir and a directory outside
/// every writable root.
struct World {
    sb: Sandbox,
    root: PathBuf,
}

impl World {
    fn new() -> World {
        let sb = Sandbox::new();
        let root = std::fs::canonicalize(sb.root()).unwrap();
        let w = World { sb, root };
        for d in ["out", "tmp", "cwd/src", "cwd/.pi/extensions"] {
            std::fs::create_dir_all(w.root.join(d)).unwrap();
        }
        std::fs::write(w.ws().join("src/a.txt"), "old text\n").unwrap();
        std::fs::write(w.out().join("edit.txt"), "old text\n").unwrap();
        let git = |args: &[&str]| {
            let ok = std::process::Command::new("git")
                .args(args)
                .current_dir(w.ws())
                .env("HOME", w.home())
                .output()
                .unwrap();
            assert!(ok.status.success(), "git {args:?}: {ok:?}");
        };
        git(&["init", "-q"]);
        git(&[
            "-c",
            "user.email=t@t",
            "-c",
            "user.name=t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "init",
        ]);
        for (i, p) in w.credential_files().iter().enumerate() {
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            // JSON, so pi-run itself can read auth.json.
            std::fs::write(p, format!("{{\"note\": \"{SECRET}{i}\"}}\n")).unwrap();
        }
        std::os::unix::fs::symlink(w.out(), w.ws().join("link")).unwrap();
        std::os::unix::fs::symlink(w.out().join("dangling.txt"), w.ws().join("dangling")).unwrap();
        w
    }

    fn ws(&self) -> PathBuf {
        self.root.join("cwd")
    }
    fn home(&self) -> PathBuf {
        self.root.join("home")
    }
    fn out(&self) -> PathBuf {
        self.root.join("out")
    }

    /// One readable file per hidden credential store (a file inside each
    /// hidden directory).
    fn credential_files(&self) -> Vec<PathBuf> {
        const DIRS: [&str; 7] = [
            ".ssh",
            ".aws",
            ".azure",
            ".config/gcloud",
            ".config/gh",
            ".kube",
            ".gnupg",
        ];
        let mut v: Vec<PathBuf> = pi_lib::sandbox::paths::HIDDEN_IN_HOME
            .iter()
            .map(|p| {
                let f = self.home().join(p);
                if DIRS.contains(p) {
                    f.join("secret")
                } else {
                    f
                }
            })
            .collect();
        v.extend(
            pi_lib::sandbox::paths::HIDDEN_IN_AGENT_DIR
                .iter()
                .map(|p| self.sb.agent().join(p)),
        );
        v
    }

    /// A faux script: one line per turn.
    fn script(&self, turns: &[Value]) -> String {
        let p = self.root.join(format!("script-{}.jsonl", uuid_like()));
        let text: Vec<String> = turns.iter().map(|t| t.to_string()).collect();
        std::fs::write(&p, text.join("\n") + "\n").unwrap();
        p.display().to_string()
    }

    /// pi-run in `--mode json` on `script` with `args`, the secrets and a
    /// plain variable in its environment.
    fn run(&self, script: &str, args: &[&str]) -> (Output, Vec<Value>) {
        let out = self
            .sb
            .cmd("pi-run")
            .env("TMPDIR", self.root.join("tmp"))
            .env("MY_SECRET_TOKEN", format!("{SECRET}env-token"))
            .env("OPENAI_API_KEY", format!("{SECRET}env-openai"))
            .env("AWS_PROFILE", format!("{SECRET}env-aws"))
            .env("PLAIN_VAR", "plain-visible")
            .args([
                "--provider",
                "faux",
                "--model",
                script,
                "--mode",
                "json",
                "--no-session",
            ])
            .args(args)
            .arg("go")
            .output()
            .unwrap();
        let events = jsonl(&out);
        (out, events)
    }

    /// Runs the tool calls `calls` (`(id, name, arguments)`, one turn) in
    /// `mode`; the results by id, (text, is_error).
    fn calls(&self, mode: &str, calls: &[(&str, &str, Value)], extra: &[&str]) -> Results {
        let tool_calls: Vec<Value> = calls
            .iter()
            .map(|(id, name, args)| json!({"id": id, "name": name, "arguments": args}))
            .collect();
        let script = self.script(&[json!({"toolCalls": tool_calls}), json!({"text": "done"})]);
        let mut args = vec!["--sandbox", mode];
        args.extend_from_slice(extra);
        let (out, events) = self.run(&script, &args);
        ok(&out);
        results(&events)
    }
}

/// A name no two scripts of one world share.
fn uuid_like() -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    N.fetch_add(1, Ordering::SeqCst).to_string()
}

/// Tool results by call id: (text, is_error).
type Results = BTreeMap<String, (String, bool)>;

fn results(events: &[Value]) -> Results {
    events
        .iter()
        .filter(|e| e["type"] == "tool_execution_end")
        .map(|e| {
            let text = e["result"]["content"]
                .as_array()
                .map(|c| {
                    c.iter()
                        .filter_map(|b| b["text"].as_str())
                        .collect::<String>()
                })
                .unwrap_or_default();
            (
                e["toolCallId"].as_str().unwrap_or("").to_string(),
                (text, e["isError"] == true),
            )
        })
        .collect()
}

fn bash(id: &str, command: String) -> (&str, &'static str, Value) {
    (id, "bash", json!({ "command": command }))
}

#[test]
fn writes_outside_the_workspace_fail_through_bash_tools_symlinks_and_dotdot() {
    let w = World::new();
    let out = w.out().display().to_string();
    let calls = [
        bash("bash", format!("echo pwn > {out}/bash.txt")),
        (
            "write",
            "write",
            json!({"path": format!("{out}/write.txt"), "content": "pwn"}),
        ),
        (
            "edit",
            "edit",
            json!({"path": format!("{out}/edit.txt"), "oldText": "old", "newText": "pwn"}),
        ),
        (
            "sym-write",
            "write",
            json!({"path": "link/sym-write.txt", "content": "pwn"}),
        ),
        bash("sym-bash", "echo pwn > link/sym-bash.txt".into()),
        (
            "dangling-write",
            "write",
            json!({"path": "dangling", "content": "pwn"}),
        ),
        (
            "dotdot-write",
            "write",
            json!({"path": "src/../../out/dotdot-write.txt", "content": "pwn"}),
        ),
        bash(
            "dotdot-bash",
            "echo pwn > src/../../out/dotdot-bash.txt".into(),
        ),
        bash(
            "inside",
            "echo fine > src/new.txt && cat src/new.txt".into(),
        ),
    ];
    let created = [
        "bash.txt",
        "write.txt",
        "sym-write.txt",
        "sym-bash.txt",
        "dangling.txt",
        "dotdot-write.txt",
        "dotdot-bash.txt",
    ];
    let r = w.calls("workspace-write", &calls, &[]);
    for f in created {
        assert!(
            !w.out().join(f).exists(),
            "{f} was written under the sandbox: {r:#?}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(w.out().join("edit.txt")).unwrap(),
        "old text\n"
    );
    for id in [
        "write",
        "edit",
        "sym-write",
        "dangling-write",
        "dotdot-write",
    ] {
        let (text, is_error) = &r[id];
        assert!(
            *is_error && text.starts_with("Permission denied: "),
            "{id}: {text}"
        );
        assert!(
            text.contains("outside the writable roots of the workspace-write sandbox"),
            "{id}: {text}"
        );
        assert!(text.contains(&out), "{id} names the path: {text}");
    }
    for id in ["bash", "sym-bash", "dotdot-bash"] {
        assert!(r[id].0.contains("Permission denied"), "{id}: {:?}", r[id]);
    }
    assert!(r["inside"].0.contains("fine"), "{:?}", r["inside"]);

    // The control run, without a sandbox: every one of them lands.
    let r = w.calls("danger-full-access", &calls, &[]);
    for f in created {
        assert!(
            w.out().join(f).exists(),
            "{f} not written without a sandbox: {r:#?}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(w.out().join("edit.txt")).unwrap(),
        "pwn text\n"
    );
}

#[test]
fn git_hooks_git_config_and_pi_stay_read_only_while_commits_work() {
    let w = World::new();
    let commit = "git add -A && git -c user.email=t@t -c user.name=t commit -qm work && git log --oneline | wc -l";
    let calls = [
        bash(
            "hook",
            "echo 'curl evil' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit".into(),
        ),
        bash(
            "config",
            "printf '[core]\\n\\tfsmonitor = evil\\n' >> .git/config".into(),
        ),
        bash(
            "ext",
            "echo 'export default 1' > .pi/extensions/x.ts".into(),
        ),
        (
            "hook-write",
            "write",
            json!({"path": ".git/hooks/post-commit", "content": "evil"}),
        ),
        (
            "config-edit",
            "edit",
            json!({"path": ".git/config", "oldText": "[core]", "newText": "[core]\n\tfsmonitor = evil"}),
        ),
        (
            "ext-write",
            "write",
            json!({"path": ".pi/extensions/y.ts", "content": "evil"}),
        ),
        (
            "mcp-write",
            "write",
            json!({"path": ".pi/mcp.json", "content": "{}"}),
        ),
    ];
    let config_before = std::fs::read_to_string(w.ws().join(".git/config")).unwrap();
    let r = w.calls("workspace-write", &calls, &[]);
    for f in [
        ".git/hooks/pre-commit",
        ".git/hooks/post-commit",
        ".git/hooks/post-checkout",
        ".git/hooks-old",
        ".pi/extensions/x.ts",
        ".pi/extensions/y.ts",
        ".pi/mcp.json",
    ] {
        assert!(
            !w.ws().join(f).exists(),
            "{f} written under the sandbox: {r:#?}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(w.ws().join(".git/config")).unwrap(),
        config_before
    );
    for id in ["hook-write", "config-edit", "ext-write", "mcp-write"] {
        let (text, is_error) = &r[id];
        assert!(
            *is_error && text.contains("is read-only in the workspace-write sandbox"),
            "{id}: {text}"
        );
    }
    for id in ["hook", "config", "ext"] {
        let t = &r[id].0;
        assert!(
            t.contains("Read-only file system")
                || t.contains("Device or resource busy")
                || t.contains("Permission denied"),
            "{id}: {t}"
        );
    }
    // The rest of .git stays writable: a commit goes through.
    let r = w.calls("workspace-write", &[bash("commit", commit.into())], &[]);
    assert!(r["commit"].0.trim().ends_with('2'), "{:?}", r["commit"]);

    // Without a sandbox every one of them lands.
    let r = w.calls("danger-full-access", &calls, &[]);
    for f in [
        ".git/hooks/pre-commit",
        ".git/hooks/post-commit",
        ".pi/extensions/x.ts",
        ".pi/extensions/y.ts",
        ".pi/mcp.json",
    ] {
        assert!(
            w.ws().join(f).exists(),
            "{f} not written without a sandbox: {r:#?}"
        );
    }
    assert!(std::fs::read_to_string(w.ws().join(".git/config"))
        .unwrap()
        .contains("fsmonitor = evil"));

    // Moving the protected directory away to put an unprotected one in its
    // place fails too (each is a mount point in the command's namespace).
    let rename = [bash(
        "rename",
        "mv .git/hooks .git/hooks-old && mkdir .git/hooks && echo evil > .git/hooks/post-checkout"
            .into(),
    )];
    let r = w.calls("workspace-write", &rename, &[]);
    assert!(!w.ws().join(".git/hooks-old").exists(), "{r:?}");
    assert!(!w.ws().join(".git/hooks/post-checkout").exists(), "{r:?}");
    w.calls("danger-full-access", &rename, &[]);
    assert!(
        w.ws().join(".git/hooks-old").exists() && w.ws().join(".git/hooks/post-checkout").exists()
    );
}

/// A `commondir` in the repository's git dir moves its config and hooks
/// wherever it points: git would run a planted `core.fsmonitor` or hook
/// unconfined. The write tool refuses it, one a command makes is removed
/// after the call, and a command left running in the background to make
/// one later is killed with the run.
#[test]
fn a_planted_git_commondir_is_refused_removed_and_outlived() {
    let w = World::new();
    let commondir = w.ws().join(".git/commondir");
    let calls = [
        bash(
            "plant",
            "cp -r .git planted-git && echo ../planted-git > .git/commondir && echo planted".into(),
        ),
        (
            "write",
            "write",
            json!({"path": ".git/commondir", "content": "../planted-git"}),
        ),
        bash(
            "later",
            "setsid sh -c 'sleep 2; echo ../planted-git > .git/commondir' </dev/null >/dev/null 2>&1 & echo started".into(),
        ),
    ];
    // The background one runs on its own: tool calls of one message run
    // at once, and its call (which ends at once) could sweep the planted
    // commondir before the planting call's own sweep reports it.
    let r = w.calls("workspace-write", &calls[..2], &[]);
    assert!(r["plant"].0.contains("planted"), "{:?}", r["plant"]);
    assert!(
        r["plant"].0.contains(&format!(
            "Permission denied: {} was removed",
            commondir.display()
        )),
        "{:?}",
        r["plant"]
    );
    let (text, is_error) = &r["write"];
    assert!(
        *is_error && text.contains("cannot be created in the workspace-write sandbox"),
        "{text}"
    );
    let later = w.calls("workspace-write", &calls[2..], &[]);
    assert!(later["later"].0.contains("started"), "{later:?}");
    std::thread::sleep(std::time::Duration::from_millis(3500));
    assert!(
        !commondir.exists(),
        "a commondir outlived the run: {later:#?}"
    );
    let status = std::process::Command::new("git")
        .args(["status", "--short"])
        .current_dir(w.ws())
        .output()
        .unwrap();
    assert!(status.status.success(), "{status:?}");
    // Without a sandbox both land.
    std::fs::remove_dir_all(w.ws().join("planted-git")).unwrap();
    let r = w.calls("danger-full-access", &calls[..1], &[]);
    assert!(commondir.exists(), "control: {r:#?}");
    std::fs::remove_file(&commondir).unwrap();
    w.calls("danger-full-access", &calls[2..], &[]);
    std::thread::sleep(std::time::Duration::from_millis(3500));
    assert!(commondir.exists(), "control: the background one lands");
}

#[test]
fn credentials_are_hidden_from_bash_read_grep_and_proc() {
    let w = World::new();
    // The user's settings hide one more path (`denyRead`).
    let private = w.home().join("private/notes.txt");
    std::fs::create_dir_all(private.parent().unwrap()).unwrap();
    std::fs::write(
        w.sb.agent().join("settings.json"),
        json!({"sandbox": {"denyRead": ["~/private"]}}).to_string(),
    )
    .unwrap();
    let mut files = w.credential_files();
    files.push(private.clone());
    std::fs::write(&private, format!("{SECRET}{}\n", files.len() - 1)).unwrap();
    let mut calls = Vec::new();
    for (i, f) in files.iter().enumerate() {
        calls.push(bash(
            Box::leak(format!("cat-{i}").into_boxed_str()),
            format!("cat '{}'", f.display()),
        ));
        calls.push((
            Box::leak(format!("read-{i}").into_boxed_str()) as &str,
            "read",
            json!({ "path": f.display().to_string() }),
        ));
    }
    calls.push(bash(
        "environ",
        "cat /proc/$PPID/environ | tr '\\0' '\\n'".into(),
    ));
    calls.push((
        "grep",
        "grep",
        json!({"pattern": "SECRET-", "path": w.home().display().to_string()}),
    ));
    let tools = ["--tools", "read,bash,grep"];
    let r = w.calls("read-only", &calls, &tools);
    for (id, (text, _)) in &r {
        assert!(
            !text.contains(SECRET),
            "{id} saw a secret under the sandbox: {text}"
        );
    }
    for i in 0..files.len() {
        let (text, is_error) = &r[&format!("read-{i}")];
        assert!(
            *is_error && text.contains("is hidden by the read-only sandbox"),
            "read-{i}: {text}"
        );
        assert!(
            text.contains(&files[i].display().to_string()),
            "names the path: {text}"
        );
    }
    // The control run reads every one.
    let r = w.calls("danger-full-access", &calls, &tools);
    for i in 0..files.len() {
        for id in [format!("cat-{i}"), format!("read-{i}")] {
            assert!(
                r[&id].0.contains(&format!("{SECRET}{i}")),
                "{id}: {:?}",
                r[&id]
            );
        }
    }
    assert!(
        r["environ"].0.contains(&format!("{SECRET}env-token")),
        "{:?}",
        r["environ"]
    );
    assert!(r["grep"].0.contains(SECRET), "{:?}", r["grep"]);
}

#[test]
fn secret_variables_are_withheld_and_plain_ones_pass() {
    let w = World::new();
    let calls = [bash("env", "env".into())];
    let r = w.calls("workspace-write", &calls, &[]);
    let env = &r["env"].0;
    assert!(!env.contains(SECRET), "{env}");
    assert!(env.contains("PLAIN_VAR=plain-visible"), "{env}");
    // --env-keep brings one back, and only that one.
    let r = w.calls(
        "workspace-write",
        &calls,
        &["--env-keep", "MY_SECRET_TOKEN"],
    );
    let env = &r["env"].0;
    assert!(
        env.contains(&format!("MY_SECRET_TOKEN={SECRET}env-token")),
        "{env}"
    );
    assert!(
        !env.contains("env-openai") && !env.contains("env-aws"),
        "{env}"
    );
    let r = w.calls("danger-full-access", &calls, &[]);
    let env = &r["env"].0;
    for v in ["env-token", "env-openai", "env-aws"] {
        assert!(env.contains(v), "{v} hidden without a sandbox: {env}");
    }
}

#[test]
fn network_is_off_loopback_included_and_unix_sockets_work() {
    let w = World::new();
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let sock = w.root.join("tmp/s.sock");
    let unix = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    unix.set_nonblocking(true).unwrap();
    let (tp, up) = (
        tcp.local_addr().unwrap().port(),
        udp.local_addr().unwrap().port(),
    );
    let calls = [
        bash("tcp", format!("exec 3<>/dev/tcp/127.0.0.1/{tp} && echo tcp-connected")),
        bash("udp", format!("echo datagram > /dev/udp/127.0.0.1/{up} && echo udp-sent")),
        bash(
            "unix",
            format!(
                "python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); s.connect('{}'); print('unix-connected')\"",
                sock.display()
            ),
        ),
    ];
    let count = |l: &std::net::TcpListener| std::iter::from_fn(|| l.accept().ok()).count();
    let datagrams = |u: &std::net::UdpSocket| {
        let mut buf = [0u8; 64];
        std::iter::from_fn(|| u.recv(&mut buf).ok()).count()
    };
    let r = w.calls("read-only", &calls, &[]);
    assert_eq!(
        count(&tcp),
        0,
        "a TCP connection arrived under the sandbox: {r:#?}"
    );
    assert_eq!(
        datagrams(&udp),
        0,
        "a datagram arrived under the sandbox: {r:#?}"
    );
    assert!(
        !r["tcp"].0.contains("tcp-connected") && !r["udp"].0.contains("udp-sent"),
        "{r:#?}"
    );
    assert!(
        r["unix"].0.contains("unix-connected"),
        "Unix sockets stay allowed: {:?}",
        r["unix"]
    );
    // --sandbox-network lets them through, as does no sandbox.
    for (mode, extra) in [
        ("read-only", &["--sandbox-network"][..]),
        ("read-only", &["--sandbox-network=on"]),
        ("danger-full-access", &[]),
    ] {
        let r = w.calls(mode, &calls, extra);
        assert_eq!(count(&tcp), 1, "{mode} {extra:?}: {r:#?}");
        assert_eq!(datagrams(&udp), 1, "{mode} {extra:?}: {r:#?}");
    }
}

/// Every file under `dir` (`.git` included) with its contents; symlinks
/// by their target.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let t = e.file_type().unwrap();
            if t.is_symlink() {
                out.insert(
                    p.clone(),
                    std::fs::read_link(&p)
                        .unwrap()
                        .into_os_string()
                        .into_encoded_bytes(),
                );
            } else if t.is_dir() {
                out.insert(p.clone(), b"<dir>".to_vec());
                stack.push(p);
            } else {
                out.insert(p.clone(), std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

#[test]
fn read_only_changes_nothing_in_the_workspace() {
    let w = World::new();
    let calls = [
        bash("bash", "echo x > new.txt; rm -f src/a.txt; mkdir d; touch src/a.txt; git add -A; git -c user.email=t@t -c user.name=t commit -qm x; echo tmp > \"$TMPDIR/t\"".into()),
        ("write", "write", json!({"path": "src/b.txt", "content": "x"})),
        ("edit", "edit", json!({"path": "src/a.txt", "oldText": "old", "newText": "new"})),
    ];
    let before = snapshot(&w.ws());
    let r = w.calls("read-only", &calls, &[]);
    assert_eq!(
        snapshot(&w.ws()),
        before,
        "the workspace changed under read-only: {r:#?}"
    );
    assert!(!w.root.join("tmp/t").exists());
    for id in ["write", "edit"] {
        assert!(
            r[id].0.contains("the read-only sandbox allows no writes"),
            "{id}: {:?}",
            r[id]
        );
    }
    let r = w.calls("danger-full-access", &calls, &[]);
    assert_ne!(snapshot(&w.ws()), before, "control: {r:#?}");
}

/// The `sandbox` record of a JSON run, if any.
fn record(events: &[Value]) -> Option<&Value> {
    events.iter().find(|e| e["type"] == "sandbox")
}

#[test]
fn a_trusted_project_tightens_the_users_sandbox_but_never_loosens_it() {
    let w = World::new();
    let settings =
        |v: Value| std::fs::write(w.sb.agent().join("settings.json"), v.to_string()).unwrap();
    let project =
        |v: Value| std::fs::write(w.ws().join(".pi/settings.json"), v.to_string()).unwrap();
    let script = w.script(&[json!({"text": "done"})]);
    let mode_of = |args: &[&str]| {
        let (out, events) = w.run(&script, args);
        ok(&out);
        (
            record(&events).map(|r| r["mode"].as_str().unwrap().to_string()),
            record(&events).map(|r| r["network"] == true),
            stderr(&out),
        )
    };
    settings(json!({"sandbox": {"mode": "workspace-write", "network": true}}));
    // A trusted project asking for less is ignored, with a warning.
    project(json!({"sandbox": "danger-full-access"}));
    let (m, net, err) = mode_of(&["-a"]);
    assert_eq!(
        (m.as_deref(), net),
        (Some("workspace-write"), Some(true)),
        "{err}"
    );
    assert!(
        err.contains("sandbox.mode ignored: a project may only tighten the sandbox"),
        "{err}"
    );
    project(json!({"sandbox": {"writableRoots": ["/"], "envKeep": ["MY_SECRET_TOKEN"]}}));
    let (m, _, err) = mode_of(&["-a"]);
    assert_eq!(m.as_deref(), Some("workspace-write"));
    assert!(
        err.contains("sandbox.writableRoots ignored") && err.contains("sandbox.envKeep ignored"),
        "{err}"
    );
    // Asking for more is taken.
    project(json!({"sandbox": {"mode": "read-only", "network": false}}));
    let (m, net, _) = mode_of(&["-a"]);
    assert_eq!((m.as_deref(), net), (Some("read-only"), Some(false)));
    // An untrusted project's settings are never read.
    let (m, net, _) = mode_of(&["--no-approve"]);
    assert_eq!((m.as_deref(), net), (Some("workspace-write"), Some(true)));
    // The command line overrides the user's settings both ways.
    let (m, _, err) = mode_of(&["--no-approve", "--sandbox", "danger-full-access"]);
    assert_eq!(m, None, "no record without a sandbox");
    assert!(!err.contains("sandbox"), "no sandbox line: {err}");
    let (_, net, _) = mode_of(&["--no-approve", "--sandbox-network=off"]);
    assert_eq!(net, Some(false));
    settings(json!({}));
    let (m, _, _) = mode_of(&["--no-approve", "--sandbox", "read-only"]);
    assert_eq!(m.as_deref(), Some("read-only"));
    // The tightened sandbox is the one enforced.
    project(json!({"sandbox": "read-only"}));
    settings(json!({"sandbox": "workspace-write"}));
    let r = w.calls(
        "workspace-write",
        &[bash("w", "echo x > src/t.txt".into())],
        &["-a"],
    );
    assert!(!w.ws().join("src/t.txt").exists(), "{r:?}");
}

#[test]
fn the_sandbox_is_announced_on_stderr_and_recorded_after_the_header() {
    let w = World::new();
    let script = w.script(&[json!({"text": "done"})]);
    let (out, events) = w.run(&script, &["--sandbox", "workspace-write"]);
    ok(&out);
    assert_eq!(events[0]["type"], "session");
    // Right after the header and the trust record (the project has a .pi/extensions).
    assert_eq!(events[1]["type"], "trust", "{:?}", events[1]);
    assert_eq!(events[2]["type"], "sandbox", "{:?}", events[2]);
    let r = &events[2];
    let ws = w.ws().display().to_string();
    assert_eq!(r["mode"], "workspace-write");
    assert_eq!(r["network"], false);
    assert_eq!(r["workspace"], ws.as_str());
    assert!(r["writableRoots"].as_array().unwrap().contains(&json!(ws)));
    assert!(r["readOnly"]
        .as_array()
        .unwrap()
        .contains(&json!(format!("{ws}/.git/hooks"))));
    assert!(r["hidden"].as_array().unwrap().contains(&json!(w
        .home()
        .join(".ssh")
        .display()
        .to_string())));
    assert!(r["envHidden"]
        .as_array()
        .unwrap()
        .contains(&json!("MY_SECRET_TOKEN")));
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("sandbox")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].starts_with("pi-run: sandbox workspace-write, network off; writable: "),
        "{err}"
    );
    assert!(
        lines[0].contains("hidden: ~/.ssh") && lines[0].contains("MY_SECRET_TOKEN"),
        "{err}"
    );
    assert!(!lines[0].contains(SECRET), "values never shown: {err}");
    // No sandbox: nothing said, as before.
    let (out, events) = w.run(&script, &[]);
    ok(&out);
    assert!(record(&events).is_none() && !stderr(&out).contains("sandbox"));
}

/// Runs RPC commands (stdin, then EOF with --drain); the responses.
fn rpc(w: &World, commands: &[Value], args: &[&str]) -> Vec<Value> {
    use std::io::Write;
    let script = w.script(&[json!({"text": "done"})]);
    let mut child =
        w.sb.cmd("pi-run")
            .env("TMPDIR", w.root.join("tmp"))
            .env("MY_SECRET_TOKEN", format!("{SECRET}env-token"))
            .args([
                "--provider",
                "faux",
                "--model",
                &script,
                "--mode",
                "rpc",
                "--drain",
                "--no-session",
            ])
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for c in commands {
        writeln!(stdin, "{c}").unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    jsonl(&out)
        .into_iter()
        .filter(|r| r["type"] == "response")
        .collect()
}

#[test]
fn rpc_bash_is_confined_and_get_state_reports_the_sandbox() {
    let w = World::new();
    let ssh = w.credential_files()[0].display().to_string();
    let out = w.out().display().to_string();
    let commands = [
        json!({"id": "s", "type": "get_state"}),
        json!({"id": "b", "type": "bash", "command": format!("cat '{ssh}'; echo x > {out}/rpc.txt; env")}),
    ];
    let r = rpc(&w, &commands, &["--sandbox", "workspace-write"]);
    let state = r.iter().find(|r| r["id"] == "s").unwrap();
    assert_eq!(
        state["data"]["sandbox"]["mode"], "workspace-write",
        "{state}"
    );
    assert_eq!(state["data"]["sandbox"]["network"], false);
    let b = r.iter().find(|r| r["id"] == "b").unwrap().to_string();
    assert!(!b.contains(SECRET), "{b}");
    assert!(!w.out().join("rpc.txt").exists(), "{b}");
    let r = rpc(&w, &commands, &[]);
    let state = r.iter().find(|r| r["id"] == "s").unwrap();
    assert!(
        state["data"].get("sandbox").is_none(),
        "absent without a sandbox, as pi: {state}"
    );
    let b = r.iter().find(|r| r["id"] == "b").unwrap().to_string();
    assert!(
        b.contains(&format!("{SECRET}0")) && b.contains("env-token"),
        "{b}"
    );
    assert!(w.out().join("rpc.txt").exists(), "{b}");
}

#[test]
fn setup_failure_exits_5_before_any_model_request() {
    let w = World::new();
    let server = ScriptServer::start(vec![Reply::Sse(sse_text("hi"))]);
    server.configure(&w.sb.agent());
    let run = |mode: &str, fail: Option<&str>| {
        let mut c = w.sb.cmd("pi-run");
        if let Some(f) = fail {
            c.env("PI_SANDBOX_TEST_FAIL", f);
        }
        c.args(["--sandbox", mode, "-p", "hi"]).output().unwrap()
    };
    let cases = [
        (
            "workspace-write",
            "userns",
            "unprivileged user namespaces are unavailable",
        ),
        ("workspace-write", "mount", "cannot mount"),
        ("workspace-write", "caps", "cannot drop capabilities"),
        ("workspace-write", "landlock", "Landlock refused"),
        ("read-only", "landlock", "Landlock refused"),
        ("read-only", "seccomp", "seccomp refused"),
    ];
    for (mode, fail, says) in cases {
        let out = run(mode, Some(fail));
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(5), "{mode} {fail}: {err}");
        let lines: Vec<&str> = err
            .lines()
            .filter(|l| !l.contains("project untrusted"))
            .collect();
        assert_eq!(lines.len(), 1, "one line: {err}");
        assert!(
            lines[0].starts_with(&format!("pi-run: error: sandbox {mode} cannot be set up: ")),
            "{err}"
        );
        assert!(
            err.contains(says) && err.contains("forced by PI_SANDBOX_TEST_FAIL"),
            "{err}"
        );
        assert!(
            server.requests.lock().unwrap().is_empty(),
            "a model request was made: {mode} {fail}"
        );
    }
    // A writable root that is not a directory stops the run the same way.
    std::fs::write(
        w.sb.agent().join("settings.json"),
        json!({"defaultProvider": "mock", "defaultModel": "mock-model", "sandbox": {"mode": "workspace-write", "writableRoots": ["/nonexistent-root"]}}).to_string(),
    )
    .unwrap();
    let out = w.sb.cmd("pi-run").args(["-p", "hi"]).output().unwrap();
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert!(stderr(&out).contains("writable root /nonexistent-root is not a directory"));
    // A malformed setting is a configuration error (2), naming the field.
    std::fs::write(
        w.sb.agent().join("settings.json"),
        json!({"defaultProvider": "mock", "defaultModel": "mock-model", "sandbox": "closed"})
            .to_string(),
    )
    .unwrap();
    let out = w.sb.cmd("pi-run").args(["-p", "hi"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("settings.json: sandbox: unknown mode \"closed\""),
        "{}",
        stderr(&out)
    );
    assert!(server.requests.lock().unwrap().is_empty());
    // Without the switch the same run goes through.
    std::fs::write(
        w.sb.agent().join("settings.json"),
        json!({"defaultProvider": "mock", "defaultModel": "mock-model"}).to_string(),
    )
    .unwrap();
    ok(&run("workspace-write", None));
    assert_eq!(server.requests.lock().unwrap().len(), 1);
}
#[test]
fn a_subagent_child_is_confined_like_its_parent() {
    let w = World::new();
    ok(&w
        .sb
        .cmd("pi-resources")
        .args(["agents", "--enable", "--format", "jsonl"])
        .output()
        .unwrap());
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let (tp, up) = (
        tcp.local_addr().unwrap().port(),
        udp.local_addr().unwrap().port(),
    );
    let count = |l: &std::net::TcpListener| std::iter::from_fn(|| l.accept().ok()).count();
    let datagrams = |u: &std::net::UdpSocket| {
        let mut buf = [0u8; 64];
        std::iter::from_fn(|| u.recv(&mut buf).ok()).count()
    };
    let out = w.out().display().to_string();
    let ssh = w.credential_files()[0].display().to_string();
    let script = [
        format!("echo pwn > {out}/child-bash.txt"),
        "echo pwn > link/child-sym.txt".into(),
        "echo pwn > src/../../out/child-dotdot.txt".into(),
        "echo pwn > .git/hooks/pre-push".into(),
        "echo pwn > .pi/extensions/child.ts".into(),
        format!("cat '{ssh}'"),
        "env".into(),
    ]
    .join("; ");
    let tcp_call = format!("exec 3<>/dev/tcp/127.0.0.1/{tp} && echo tcp-connected");
    let udp_call = format!("echo datagram > /dev/udp/127.0.0.1/{up} && echo udp-sent");
    let child_calls = [
        ("bash", json!({ "command": script }).to_string()),
        ("bash", json!({ "command": tcp_call }).to_string()),
        ("bash", json!({ "command": udp_call }).to_string()),
        (
            "write",
            json!({"path": format!("{out}/child-write.txt"), "content": "pwn"}).to_string(),
        ),
        (
            "edit",
            json!({"path": format!("{out}/edit.txt"), "oldText": "old", "newText": "pwn"})
                .to_string(),
        ),
        (
            "write",
            json!({"path": ".git/hooks/pre-commit", "content": "pwn"}).to_string(),
        ),
        (
            "write",
            json!({"path": ".pi/extensions/child-write.ts", "content": "pwn"}).to_string(),
        ),
        ("read", json!({ "path": ssh }).to_string()),
    ];
    let created = [
        "out/child-bash.txt",
        "out/child-sym.txt",
        "out/child-dotdot.txt",
        "out/child-write.txt",
        "cwd/.git/hooks/pre-push",
        "cwd/.git/hooks/pre-commit",
        "cwd/.pi/extensions/child.ts",
        "cwd/.pi/extensions/child-write.ts",
    ];
    let run = |mode: &str| {
        let agent_call = json!({"subagent_type": "general-purpose", "prompt": "try things", "description": "Try"}).to_string();
        let child: Vec<(&str, &str)> = child_calls.iter().map(|(n, a)| (*n, a.as_str())).collect();
        let server = ScriptServer::start(vec![
            Reply::Sse(sse_tools(&[("Agent", &agent_call)])),
            Reply::Sse(sse_tools(&child)),
            Reply::Sse(sse_text("child done")),
            Reply::Sse(sse_text("parent done")),
        ]);
        server.configure(&w.sb.agent());
        let o =
            w.sb.cmd("pi-run")
                .env("TMPDIR", w.root.join("tmp"))
                .env("MY_SECRET_TOKEN", format!("{SECRET}env-token"))
                .env("PLAIN_VAR", "plain-visible")
                .args(["--sandbox", mode, "-p", "delegate"])
                .output()
                .unwrap();
        ok(&o);
        let reqs = server.requests.lock().unwrap().clone();
        assert_eq!(reqs.len(), 4, "{reqs:#?}");
        // The child's second request carries its tool results.
        reqs[2]["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| m["content"].to_string())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let seen = run("workspace-write");
    assert!(!seen.contains(SECRET), "{seen}");
    assert!(seen.contains("PLAIN_VAR=plain-visible"), "{seen}");
    assert_eq!(count(&tcp), 0, "a TCP connection from the child: {seen}");
    assert_eq!(datagrams(&udp), 0, "a datagram from the child: {seen}");
    assert!(
        !seen.contains("tcp-connected") && !seen.contains("udp-sent"),
        "{seen}"
    );
    assert!(
        seen.contains("outside the writable roots")
            && seen.contains("is read-only in the workspace-write sandbox"),
        "{seen}"
    );
    for f in created {
        assert!(!w.root.join(f).exists(), "{f}: {seen}");
    }
    assert_eq!(
        std::fs::read_to_string(w.out().join("edit.txt")).unwrap(),
        "old text\n"
    );
    // The control run: the same child, no sandbox, every escape lands.
    let seen = run("danger-full-access");
    assert!(
        seen.contains(&format!("{SECRET}0")) && seen.contains("env-token"),
        "{seen}"
    );
    assert_eq!(count(&tcp), 1, "control: {seen}");
    assert_eq!(datagrams(&udp), 1, "control: {seen}");
    for f in created {
        assert!(w.root.join(f).exists(), "control {f}: {seen}");
    }
    assert_eq!(
        std::fs::read_to_string(w.out().join("edit.txt")).unwrap(),
        "pwn text\n"
    );
}
