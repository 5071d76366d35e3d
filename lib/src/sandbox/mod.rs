//! The sandbox of everything that runs for the model: the processes (the
//! bash tool, RPC `bash`, a subagent child's commands — one spawn path,
//! [`Sandbox::confine`]) and the in-process file tools (read, write, edit,
//! grep, find, ls — [`Sandbox::check_read`], [`Sandbox::check_write`]).
//! A run prepares its [`Sandbox`] once ([`Sandbox::prepare`]: the policy,
//! the Landlock ruleset, the seccomp program, the namespace plan, and a
//! probe spawn that proves the kernel takes them) and hands the same value
//! to every agent it runs, subagent children included; pi-run itself is
//! never confined. Linux only (Landlock, seccomp, user namespaces); where
//! the requested sandbox cannot be set up, the run fails closed with exit
//! 5. docs/sandbox.md describes what is and is not confined.

mod checks;
mod child;
mod cleanup;
pub mod config;
mod env;
pub mod kernel;
pub mod paths;
mod report;
#[cfg(test)]
mod tests;

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use config::{CliSandbox, Config, Mode};
use kernel::Kernel;
use paths::Protected;

/// Why the requested sandbox cannot be set up (pi-run exits 5).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("sandbox {mode} cannot be set up: {reason}")]
pub struct SetupError {
    pub mode: &'static str,
    pub reason: String,
}

/// The run's sandbox: its policy and what the kernel is handed. Shared
/// (`Arc`) by every tool of the run and of its subagent children.
#[derive(Debug)]
pub struct Sandbox {
    pub mode: Mode,
    pub network: bool,
    /// The workspace (resolved): the git work tree's root, else the cwd.
    pub workspace: PathBuf,
    /// Where writes may go (`workspace-write`), resolved.
    pub writable: Vec<PathBuf>,
    /// Paths inside the writable roots that stay read-only, with why.
    pub read_only: Vec<(PathBuf, Protected)>,
    /// The hidden credential stores, resolved.
    pub hidden: Vec<PathBuf>,
    /// Files no command may create (a git dir's `commondir`): removed
    /// when one appears ([`Sandbox::sweep`]).
    pub absent: Vec<PathBuf>,
    /// Provider key variables (withheld whatever their name).
    provider_keys: Vec<String>,
    /// Variables passed although they look secret.
    env_keep: Vec<String>,
    home: PathBuf,
    kernel: Option<Arc<Kernel>>,
}

/// What a run knows when it prepares its sandbox.
pub struct Setup<'a> {
    pub config: &'a Config,
    /// The run's working directory.
    pub cwd: &'a Path,
    pub agent_dir: &'a Path,
    /// The user's home directory.
    pub home: &'a Path,
    /// The system temp dir (`TMPDIR`, else `/tmp`): writable in
    /// `workspace-write`.
    pub temp: &'a Path,
    /// Every provider key variable the model registry knows.
    pub provider_keys: Vec<String>,
    /// The program the probe runs (`program -c :`, the bash tool's shell).
    pub probe: &'a Path,
}

impl Default for Sandbox {
    /// No sandbox.
    fn default() -> Self {
        Sandbox::none()
    }
}

impl Sandbox {
    /// No sandbox (`danger-full-access`): nothing is confined or checked.
    pub fn none() -> Sandbox {
        Sandbox {
            mode: Mode::DangerFullAccess,
            network: true,
            workspace: PathBuf::new(),
            writable: Vec::new(),
            read_only: Vec::new(),
            hidden: Vec::new(),
            absent: Vec::new(),
            provider_keys: Vec::new(),
            env_keep: Vec::new(),
            home: PathBuf::new(),
            kernel: None,
        }
    }

    /// Whether anything is confined.
    pub fn is_on(&self) -> bool {
        self.mode != Mode::DangerFullAccess
    }

    /// Prepares the sandbox `setup.config` asks for, and proves it with a
    /// confined probe: any step the kernel refuses is an error (fail
    /// closed). `workspace-write` creates the missing `.pi/` and git
    /// `hooks/` it protects (empty), so they cannot be made unprotected.
    pub fn prepare(setup: &Setup<'_>) -> Result<Sandbox, SetupError> {
        let c = setup.config;
        if c.mode == Mode::DangerFullAccess {
            return Ok(Sandbox::none());
        }
        let err = |reason: String| SetupError {
            mode: c.mode.name(),
            reason,
        };
        if !cfg!(target_os = "linux") {
            return Err(err("the sandbox needs Linux (Landlock and seccomp)".into()));
        }
        let home = paths::resolve(setup.home);
        let (workspace, git) = paths::workspace(setup.cwd);
        let deny: Vec<PathBuf> = c
            .deny_read
            .iter()
            .map(|p| paths::from_setting(p, &workspace))
            .collect();
        let hidden = paths::hidden_paths(&home, &paths::resolve(setup.agent_dir), &deny);
        let mut writable = Vec::new();
        let mut read_only = Vec::new();
        let mut absent = Vec::new();
        if c.mode == Mode::WorkspaceWrite {
            writable.push(workspace.clone());
            writable.push(paths::resolve(setup.temp));
            if Path::new("/dev/shm").is_dir() {
                writable.push(PathBuf::from("/dev/shm"));
            }
            for r in &c.writable_roots {
                let p = paths::from_setting(r, &workspace);
                if !p.is_dir() {
                    return Err(err(format!(
                        "writable root {} is not a directory",
                        p.display()
                    )));
                }
                writable.push(p);
            }
            writable.dedup();
            let hooks_path = git.as_ref().and_then(|_| git_hooks_path(&workspace));
            for (p, why) in
                paths::protected_paths(&workspace, setup.cwd, git.as_ref(), hooks_path.as_deref())
            {
                let p = paths::resolve(&p);
                if !writable.iter().any(|w| p.starts_with(w)) {
                    continue;
                }
                create_placeholder(&p, why).map_err(err)?;
                read_only.push((p, why));
            }
            for h in &hidden {
                if writable.iter().any(|w| h.starts_with(w)) && std::fs::symlink_metadata(h).is_ok()
                {
                    read_only.push((h.clone(), Protected::Hidden));
                }
            }
            absent = git
                .as_ref()
                .map(paths::absent_paths)
                .unwrap_or_default()
                .into_iter()
                .filter(|p| writable.iter().any(|w| p.starts_with(w)))
                .collect();
        }
        let landlock = kernel::landlock(&hidden, &writable).map_err(err)?;
        let bpf = kernel::seccomp(c.network).map_err(err)?;
        let fail = kernel::forced_failure();
        let ns = if c.mode == Mode::WorkspaceWrite {
            let ro: Vec<PathBuf> = read_only.iter().map(|(p, _)| p.clone()).collect();
            let plan = kernel::ns_plan(&ro, &writable).map_err(err)?;
            Some(kernel::namespace(plan, fail, setup.probe).map_err(err)?)
        } else {
            None
        };
        // SAFETY: geteuid cannot fail.
        let root = unsafe { libc::geteuid() } == 0;
        let sandbox = Sandbox {
            mode: c.mode,
            network: c.network,
            workspace,
            writable,
            read_only,
            hidden,
            absent,
            provider_keys: setup.provider_keys.clone(),
            env_keep: c.env_keep.clone(),
            home,
            kernel: Some(Arc::new(Kernel {
                landlock,
                bpf,
                ns,
                drop_caps: root,
                cap_last: kernel::cap_last(),
                fail,
            })),
        };
        sandbox.probe(setup.probe).map_err(err)?;
        Ok(sandbox)
    }

    /// Runs `program -c :` confined; the kernel's refusal as a sentence.
    fn probe(&self, program: &Path) -> Result<(), String> {
        let mut cmd = std::process::Command::new(program);
        cmd.arg("-c")
            .arg(":")
            .current_dir(&self.workspace)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        self.confine(&mut cmd, &self.workspace)?;
        match cmd.status() {
            Ok(s) if s.success() => Ok(()),
            Ok(s) => Err(format!(
                "the confined probe `{} -c :` failed ({s})",
                program.display()
            )),
            Err(e) => Err(self.spawn_error(&e)),
        }
    }

    /// Confines `cmd` (which will run in `cwd`): the secret-looking
    /// variables are removed from its environment and the kernel objects
    /// are installed in the child before exec. Nothing without a sandbox.
    pub fn confine(&self, cmd: &mut std::process::Command, cwd: &Path) -> Result<(), String> {
        let Some(k) = &self.kernel else {
            return Ok(());
        };
        for name in env::hidden_names(&self.provider_keys, &self.env_keep) {
            cmd.env_remove(name);
        }
        let cwd = CString::new(paths::resolve(cwd).as_os_str().as_bytes())
            .map_err(|_| format!("{}: a NUL byte in the path", cwd.display()))?;
        let k = Arc::clone(k);
        // SAFETY: the closure runs in the forked child before exec and
        // only makes async-signal-safe system calls on memory prepared
        // here and kept alive by the `Arc` (see child::install).
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(move || child::install(&k, &cwd));
        }
        Ok(())
    }

    /// A spawn error in words: the confinement step that failed, or the
    /// error itself.
    pub fn spawn_error(&self, e: &std::io::Error) -> String {
        self.kernel
            .as_ref()
            .and_then(|k| child::describe(e, k.ns.as_ref().map(|n| &n.plan), k.fail))
            .unwrap_or_else(|| e.to_string())
    }
}

/// `core.hooksPath` as git sees it in `workspace` (local, global and
/// system config), when set. Asked of git itself (at most 2 s); `None`
/// when git is missing or says nothing.
fn git_hooks_path(workspace: &Path) -> Option<PathBuf> {
    let mut child = std::process::Command::new("git")
        .arg("-C")
        .arg(workspace)
        .args(["config", "--get", "core.hooksPath"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(5))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let mut out = String::new();
    use std::io::Read;
    child.stdout.take()?.read_to_string(&mut out).ok()?;
    let p = out.trim();
    (!p.is_empty()).then(|| crate::paths::expand_tilde(Path::new(p)))
}

/// Creates a missing protected path so it can be mounted read-only: an
/// empty directory (`.pi/`, git's `hooks/`) or an empty file (git's
/// `config`).
fn create_placeholder(p: &Path, why: Protected) -> Result<(), String> {
    if std::fs::symlink_metadata(p).is_ok() {
        return Ok(());
    }
    let made = match why {
        Protected::GitConfig => std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(p)
            .map(|_| ()),
        _ => std::fs::create_dir_all(p),
    };
    made.map_err(|e| format!("cannot create {} to keep it read-only: {e}", p.display()))
}
