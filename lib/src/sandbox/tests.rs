//! Confined commands on this kernel: what each mode lets a shell command
//! do, tried for real (the integration tests try the same through pi-run).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::*;

struct World {
    _t: tempfile::TempDir,
    root: PathBuf,
}

impl World {
    fn new() -> World {
        let t = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(t.path()).unwrap();
        for d in [
            "home/.ssh",
            "agent",
            "ws/.git/hooks",
            "ws/src",
            "tmp",
            "out",
        ] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::write(root.join("home/.ssh/id_rsa"), "SECRET-KEY").unwrap();
        std::fs::write(root.join("home/.netrc"), "SECRET-NETRC").unwrap();
        std::fs::write(root.join("home/.bashrc"), "plain").unwrap();
        std::fs::write(root.join("agent/auth.json"), "SECRET-AUTH").unwrap();
        std::fs::write(root.join("ws/.git/config"), "[core]\n").unwrap();
        std::fs::write(root.join("ws/src/a.txt"), "a").unwrap();
        World { _t: t, root }
    }

    fn sandbox(&self, mode: Mode, network: bool) -> Sandbox {
        let config = Config {
            mode,
            network,
            ..Config::default()
        };
        Sandbox::prepare(&Setup {
            config: &config,
            cwd: &self.root.join("ws/src"),
            agent_dir: &self.root.join("agent"),
            home: &self.root.join("home"),
            temp: &self.root.join("tmp"),
            provider_keys: vec!["PI_TEST_PROVIDER_VAR".into()],
            probe: Path::new("/bin/sh"),
        })
        .unwrap()
    }

    /// Runs `script` with sh in `ws/src` under `s`; (exit code, output).
    fn run(&self, s: &Sandbox, script: &str) -> (i32, String) {
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(script)
            .current_dir(self.root.join("ws/src"))
            .env("R", &self.root);
        s.confine(&mut cmd, &self.root.join("ws/src")).unwrap();
        let out = cmd.output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code().unwrap_or(-1), text)
    }

    fn ok(&self, s: &Sandbox, script: &str) -> String {
        let (code, out) = self.run(s, script);
        assert_eq!(code, 0, "{script}: {out}");
        out
    }

    fn denied(&self, s: &Sandbox, script: &str) -> String {
        let (code, out) = self.run(s, script);
        assert_ne!(code, 0, "{script} was allowed: {out}");
        assert!(!out.contains("SECRET"), "{script}: {out}");
        out
    }
}

#[test]
fn read_only_reads_all_but_the_credentials_and_writes_nothing() {
    let w = World::new();
    let s = w.sandbox(Mode::ReadOnly, false);
    assert_eq!(w.ok(&s, "cat \"$R/home/.bashrc\" ../src/a.txt"), "plaina");
    w.denied(&s, "cat \"$R/home/.ssh/id_rsa\"");
    w.denied(&s, "cat \"$R/home/.netrc\"");
    w.denied(&s, "cat \"$R/agent/auth.json\"");
    w.denied(&s, "cat /proc/$PPID/environ");
    w.denied(&s, "echo x > new.txt");
    w.denied(&s, "echo x > \"$R/tmp/x\"");
    w.denied(&s, "rm a.txt");
    w.ok(&s, "echo x > /dev/null && echo y >&2");
    assert!(!w.root.join("ws/src/new.txt").exists());
    assert_eq!(
        std::fs::read_to_string(w.root.join("ws/src/a.txt")).unwrap(),
        "a"
    );
}

#[test]
fn workspace_write_keeps_hooks_config_and_pi_read_only() {
    let w = World::new();
    let s = w.sandbox(Mode::WorkspaceWrite, false);
    assert!(
        w.root.join("ws/.pi").is_dir(),
        "the missing .pi/ is made to protect it"
    );
    w.ok(
        &s,
        "echo x > new.txt && cat new.txt && mkdir -p ../built && echo y > ../built/o",
    );
    w.ok(
        &s,
        "echo t > \"$R/tmp/t\" && echo git > ../.git/index.lock && rm ../.git/index.lock",
    );
    w.denied(&s, "echo x > \"$R/out/x\"");
    w.denied(&s, "ln -s \"$R/out\" l && echo x > l/y");
    w.denied(&s, "echo x > ../.git/hooks/pre-commit");
    w.denied(&s, "echo x >> ../.git/config");
    w.denied(
        &s,
        "mkdir -p ../.pi/extensions && echo x > ../.pi/extensions/x.ts",
    );
    w.denied(&s, "mv ../.git ../.git-old");
    w.denied(&s, "mv ../.git/hooks ../.git/h2");
    w.denied(&s, "umount ../.git/hooks");
    w.denied(&s, "cat \"$R/home/.ssh/id_rsa\"");
    assert!(!w.root.join("ws/.git/hooks/pre-commit").exists());
    assert!(!w.root.join("out/x").exists());
    assert!(!w.root.join("ws/.pi/extensions/x.ts").exists());
    assert_eq!(
        std::fs::read_to_string(w.root.join("ws/.git/config")).unwrap(),
        "[core]\n"
    );
}

#[test]
fn a_commondir_in_the_git_dir_is_refused_and_swept() {
    let w = World::new();
    let s = w.sandbox(Mode::WorkspaceWrite, false);
    let commondir = w.root.join("ws/.git/commondir");
    assert_eq!(s.absent, vec![commondir.clone()]);
    let e = s.check_write(&commondir).unwrap_err();
    assert!(
        e.contains("cannot be created in the workspace-write sandbox"),
        "{e}"
    );
    assert!(s.sweep().is_empty(), "nothing to sweep yet");
    // A command can create it (the git dir is writable) ...
    w.ok(&s, "echo ../elsewhere > ../.git/commondir");
    assert!(commondir.exists());
    // ... and pi-run removes it after the call, saying so.
    let said = s.sweep();
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(said[0].contains("was removed"), "{said:?}");
    assert!(!commondir.exists());
    // A process left running in the namespace is killed at the end.
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c").arg("sleep 30");
    s.confine(&mut cmd, &w.root.join("ws")).unwrap();
    let mut child = cmd.spawn().unwrap();
    s.end(&|_| {});
    let t = std::time::Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(t.elapsed().as_secs() < 5, "still running after the end");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGKILL));
}

#[test]
fn network_off_refuses_inet_sockets_but_not_unix_ones() {
    let w = World::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let connect = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    let s = w.sandbox(Mode::ReadOnly, false);
    if Path::new("/bin/bash").exists() {
        let mut cmd = Command::new("/bin/bash");
        cmd.arg("-c").arg(&connect);
        s.confine(&mut cmd, &w.root).unwrap();
        let out = cmd.output().unwrap();
        assert!(!out.status.success(), "{out:?}");
        assert!(listener.accept().is_err(), "a connection arrived");
        let on = w.sandbox(Mode::ReadOnly, true);
        let mut cmd = Command::new("/bin/bash");
        cmd.arg("-c").arg(&connect);
        on.confine(&mut cmd, &w.root).unwrap();
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{out:?}");
    }
}

#[test]
fn secret_variables_are_withheld_unless_kept() {
    let w = World::new();
    // SAFETY (test): no other test of this binary reads these names.
    std::env::set_var("PI_TEST_SECRET_TOKEN", "SECRET-T");
    std::env::set_var("PI_TEST_PROVIDER_VAR", "SECRET-P");
    std::env::set_var("PI_TEST_PLAIN", "plain");
    let s = w.sandbox(Mode::ReadOnly, false);
    let out = w.ok(&s, "env");
    assert!(!out.contains("SECRET"), "{out}");
    assert!(out.contains("PI_TEST_PLAIN=plain"), "{out}");
    assert!(s.hidden_env().contains(&"PI_TEST_SECRET_TOKEN".to_string()));
}

#[test]
fn forced_failures_name_the_step() {
    let w = World::new();
    // The namespace's own steps fail while it is built.
    for step in [kernel::Step::Userns, kernel::Step::Mount] {
        let plan = kernel::ns_plan(&[w.root.join("ws/.git/hooks")], &[w.root.join("ws")]).unwrap();
        let e = kernel::namespace(plan, Some(step), Path::new("/bin/sh")).unwrap_err();
        assert!(
            e.contains("forced by PI_SANDBOX_TEST_FAIL"),
            "{step:?}: {e}"
        );
    }
    // The others in each command (the probe).
    let mut s = w.sandbox(Mode::WorkspaceWrite, false);
    for step in [
        kernel::Step::Caps,
        kernel::Step::Landlock,
        kernel::Step::Seccomp,
    ] {
        let k = Arc::get_mut(s.kernel.as_mut().unwrap()).unwrap();
        k.fail = Some(step);
        let e = s.probe(Path::new("/bin/sh")).unwrap_err();
        assert!(
            e.contains("forced by PI_SANDBOX_TEST_FAIL"),
            "{step:?}: {e}"
        );
    }
}

/// Spawn cost of each mode (run by hand: `cargo test --release -p pi-lib
/// --lib spawn_cost -- --ignored --nocapture`).
#[test]
#[ignore]
fn spawn_cost() {
    let w = World::new();
    let none = Sandbox::none();
    let ro = w.sandbox(Mode::ReadOnly, false);
    let ww = w.sandbox(Mode::WorkspaceWrite, false);
    for (name, s) in [
        ("none", &none),
        ("read-only", &ro),
        ("workspace-write", &ww),
        ("none", &none),
    ] {
        let n = 200;
        let t = std::time::Instant::now();
        for _ in 0..n {
            let mut cmd = Command::new("/bin/true");
            s.confine(&mut cmd, &w.root.join("ws")).unwrap();
            assert!(cmd.status().unwrap().success());
        }
        eprintln!("{name}: {:?} per spawn", t.elapsed() / n);
    }
    let n = 200;
    let t = std::time::Instant::now();
    for _ in 0..n {
        let mut cmd = Command::new("/bin/true");
        // SAFETY: an empty closure.
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(|| Ok(()));
        }
        assert!(cmd.status().unwrap().success());
    }
    eprintln!("fork only: {:?} per spawn", t.elapsed() / n);
    let k = ro.kernel.clone().unwrap();
    for variant in ["landlock", "seccomp", "fork"] {
        let t = std::time::Instant::now();
        for _ in 0..n {
            let mut cmd = Command::new("/bin/true");
            let k = Arc::clone(&k);
            // SAFETY: syscalls only.
            unsafe {
                use std::os::fd::AsRawFd;
                use std::os::unix::process::CommandExt;
                cmd.pre_exec(move || {
                    libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
                    match variant {
                        "landlock" => {
                            libc::syscall(
                                libc::SYS_landlock_restrict_self,
                                k.landlock.as_raw_fd(),
                                0u32,
                            );
                        }
                        "seccomp" => {
                            let _ = seccompiler::apply_filter(&k.bpf);
                        }
                        _ => {}
                    }
                    Ok(())
                });
            }
            assert!(cmd.status().unwrap().success());
        }
        eprintln!("{variant}: {:?} per spawn", t.elapsed() / n);
    }
}
