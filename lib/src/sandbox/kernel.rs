//! What the kernel is handed, prepared once per run in pi-run itself (which
//! stays unconfined) and installed in each child between fork and exec
//! ([`super::child`]): the Landlock ruleset (reads everywhere but the
//! hidden credential stores, writes only under the writable roots), the
//! seccomp program (no `AF_INET`/`AF_INET6` sockets when the network is
//! off, no mount or keyring calls ever), and for `workspace-write` the
//! mounts of a private user + mount namespace that keep the workspace's
//! protected paths read-only.
//!
//! Landlock only grants; it cannot carve a hole out of a granted tree. So
//! reads are granted entry by entry along the path to each hidden store
//! (every other entry of `/`, of `/home`, of `$HOME`, … gets the right for
//! its whole tree), and the read-only paths inside the writable workspace
//! are bind mounts re-mounted read-only in the child's own namespace.

use std::collections::BTreeSet;
use std::ffi::CString;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use landlock::{
    AccessFs, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope,
};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};

/// A step of confining a child; a failure names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The user namespace (unshare, uid/gid maps).
    Userns = 1,
    /// A mount of the namespace.
    Mount = 2,
    /// Dropping capabilities (root, or inside the namespace).
    Caps = 3,
    /// Landlock.
    Landlock = 4,
    /// seccomp.
    Seccomp = 5,
}

impl Step {
    pub const ALL: [Step; 5] = [
        Step::Userns,
        Step::Mount,
        Step::Caps,
        Step::Landlock,
        Step::Seccomp,
    ];

    /// The step's name (also the value of the test switch).
    pub fn name(self) -> &'static str {
        match self {
            Step::Userns => "userns",
            Step::Mount => "mount",
            Step::Caps => "caps",
            Step::Landlock => "landlock",
            Step::Seccomp => "seccomp",
        }
    }
}

/// One mount in the child's namespace: `path` bound onto itself, then, when
/// `read_only`, re-mounted read-only keeping the `locked` flags the
/// original mount has (a user namespace may not clear them).
#[derive(Debug)]
pub struct MountOp {
    pub path: PathBuf,
    pub c_path: CString,
    pub read_only: bool,
    pub locked: libc::c_ulong,
}

/// The namespace of a `workspace-write` child.
#[derive(Debug)]
pub struct NsPlan {
    /// `/proc/self/uid_map` and `gid_map` contents.
    pub uid_map: Vec<u8>,
    pub gid_map: Vec<u8>,
    /// Outermost first, so each later path is reached through the earlier
    /// mounts.
    pub mounts: Vec<MountOp>,
}

/// The run's namespace, built once by a helper process and joined by
/// every command (`setns`): the descriptors keep it alive after the helper
/// is gone.
#[derive(Debug)]
pub struct Namespace {
    pub user: OwnedFd,
    pub mnt: OwnedFd,
    pub plan: NsPlan,
}

/// Everything a child installs.
#[derive(Debug)]
pub struct Kernel {
    pub landlock: OwnedFd,
    pub bpf: BpfProgram,
    pub ns: Option<Namespace>,
    /// Root (or anyone holding capabilities) loses them all before exec.
    pub drop_caps: bool,
    /// The highest capability number of this kernel.
    pub cap_last: libc::c_int,
    /// The test switch: fail at this step as if the kernel refused it.
    pub fail: Option<Step>,
}

/// The environment variable that makes a step fail on purpose (tests of
/// the fail-closed path on a kernel where everything works).
pub const TEST_FAIL_VAR: &str = "PI_SANDBOX_TEST_FAIL";

/// Write rights granted under a writable root (no device nodes).
fn write_rights() -> landlock::BitFlags<AccessFs> {
    AccessFs::WriteFile
        | AccessFs::Truncate
        | AccessFs::RemoveDir
        | AccessFs::RemoveFile
        | AccessFs::MakeDir
        | AccessFs::MakeReg
        | AccessFs::MakeSock
        | AccessFs::MakeFifo
        | AccessFs::MakeSym
        | AccessFs::Refer
}

/// Device files every sandboxed command may write ("/dev/null and the
/// like").
const WRITABLE_DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/tty"];

/// The Landlock ruleset: `ReadFile` everywhere except under `hidden`,
/// write rights under `writable`, writes to the harmless devices; signals
/// to processes outside the sandbox are refused where the kernel can.
/// Fails when the kernel lacks Landlock ABI 3 (Linux 6.2), which every
/// right used here needs.
pub fn landlock(hidden: &[PathBuf], writable: &[PathBuf]) -> Result<OwnedFd, String> {
    let handled = write_rights() | AccessFs::ReadFile | AccessFs::MakeChar | AccessFs::MakeBlock;
    let abi = landlock_abi();
    let lacking = |e: &dyn std::fmt::Display| {
        format!(
            "Landlock ABI 3 (Linux 6.2) or later is needed; this kernel has {} ({e})",
            match abi {
                n if n > 0 => format!("ABI {n}"),
                _ => "no Landlock (not built in, or not enabled at boot: lsm=landlock)".into(),
            }
        )
    };
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(handled)
        .map_err(|e| lacking(&e))?
        .set_compatibility(CompatLevel::BestEffort)
        .scope(Scope::Signal)
        .map_err(|e| lacking(&e))?
        .set_compatibility(CompatLevel::HardRequirement)
        .create()
        .map_err(|e| lacking(&e))?;
    for p in read_grants(hidden) {
        let Some(fd) = open_path_nofollow(&p) else {
            continue;
        };
        ruleset = ruleset
            .add_rule(PathBeneath::new(fd, AccessFs::ReadFile))
            .map_err(|e| format!("Landlock rule for {}: {e}", p.display()))?;
    }
    for root in writable {
        let Ok(fd) = PathFd::new(root) else { continue };
        ruleset = ruleset
            .add_rule(PathBeneath::new(fd, write_rights()))
            .map_err(|e| format!("Landlock rule for {}: {e}", root.display()))?;
    }
    for dev in WRITABLE_DEVICES {
        let Ok(fd) = PathFd::new(dev) else { continue };
        ruleset = ruleset
            .add_rule(PathBeneath::new(
                fd,
                AccessFs::WriteFile | AccessFs::Truncate,
            ))
            .map_err(|e| format!("Landlock rule for {dev}: {e}"))?;
    }
    let fd: Option<OwnedFd> = ruleset.into();
    fd.ok_or_else(|| lacking(&"no ruleset"))
}

/// The kernel's Landlock ABI version (0 or less: none).
pub fn landlock_abi() -> i64 {
    // SAFETY: landlock_create_ruleset(NULL, 0, VERSION) only returns a
    // number; no memory is passed.
    unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32, // LANDLOCK_CREATE_RULESET_VERSION
        )
    }
}

/// The paths that get `ReadFile` for their whole tree: every entry of each
/// directory on the way to a hidden path, except the hidden paths, the
/// directories on the way (listed themselves) and symlinks (what they
/// reach is decided where it lives).
pub fn read_grants(hidden: &[PathBuf]) -> Vec<PathBuf> {
    let is_hidden = |p: &Path| hidden.iter().any(|h| p.starts_with(h));
    let on_the_way: BTreeSet<PathBuf> = hidden
        .iter()
        .flat_map(|h| h.ancestors().skip(1).map(Path::to_path_buf))
        .filter(|a| !is_hidden(a))
        .filter(|a| std::fs::symlink_metadata(a).is_ok_and(|m| m.is_dir()))
        .collect();
    let mut out = Vec::new();
    for dir in &on_the_way {
        let Ok(rd) = std::fs::read_dir(dir) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if on_the_way.contains(&p) || is_hidden(&p) {
                continue;
            }
            if e.file_type().is_ok_and(|t| t.is_symlink()) {
                continue;
            }
            out.push(p);
        }
    }
    if hidden.is_empty() {
        out.push(PathBuf::from("/"));
    }
    out
}

/// An `O_PATH` descriptor of `p` itself (a symlink is not followed).
fn open_path_nofollow(p: &Path) -> Option<OwnedFd> {
    let c = CString::new(p.as_os_str().as_bytes()).ok()?;
    // SAFETY: a valid NUL-terminated path; O_PATH needs no mode.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    // SAFETY: a fresh descriptor owned by nobody else.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The seccomp program: mount, namespace-topology and keyring calls fail
/// with `EPERM`; with the network off, so do `socket`/`socketpair` for any
/// family but `AF_UNIX` and `io_uring_setup` (which could open sockets
/// without the `socket` call).
pub fn seccomp(network: bool) -> Result<BpfProgram, String> {
    let arch: seccompiler::TargetArch = std::env::consts::ARCH.try_into().map_err(|_| {
        format!(
            "seccomp filters are not built for {}",
            std::env::consts::ARCH
        )
    })?;
    let mut denied: Vec<i64> = vec![
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_move_mount,
        libc::SYS_open_tree,
        libc::SYS_fsopen,
        libc::SYS_fsmount,
        libc::SYS_fsconfig,
        libc::SYS_fspick,
        libc::SYS_mount_setattr,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_keyctl,
    ];
    let mut not_unix: Vec<i64> = Vec::new();
    if !network {
        denied.push(libc::SYS_io_uring_setup);
        not_unix.extend([libc::SYS_socket, libc::SYS_socketpair]);
    }
    // x86_64's x32 calls share its audit arch: the same calls under their
    // x32 numbers (on kernels that have x32 at all).
    if cfg!(target_arch = "x86_64") {
        const X32: i64 = 0x4000_0000;
        denied.extend(denied.clone().iter().map(|n| n | X32));
        not_unix.extend(not_unix.clone().iter().map(|n| n | X32));
    }
    let mut rules: std::collections::BTreeMap<i64, Vec<SeccompRule>> = Default::default();
    for n in denied {
        rules.insert(n, Vec::new());
    }
    for n in not_unix {
        let cond = SeccompCondition::new(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Ne,
            libc::AF_UNIX as u64,
        )
        .map_err(|e| e.to_string())?;
        rules.insert(
            n,
            vec![SeccompRule::new(vec![cond]).map_err(|e| e.to_string())?],
        );
    }
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| e.to_string())?;
    filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())
}

/// The namespace of a `workspace-write` child: each protected path bound
/// read-only, and every directory on the way to one whose parent is
/// writable bound onto itself (a mount point cannot be renamed away and
/// replaced with an unprotected copy).
pub fn ns_plan(protected: &[PathBuf], writable: &[PathBuf]) -> Result<NsPlan, String> {
    let in_writable = |p: &Path| writable.iter().any(|w| p.starts_with(w));
    let mut paths: Vec<(PathBuf, bool)> = Vec::new();
    for p in protected {
        if !in_writable(p) || std::fs::symlink_metadata(p).is_err() {
            continue;
        }
        for a in p.ancestors().skip(1) {
            if a.parent().is_some_and(in_writable) && !paths.iter().any(|(q, _)| q == a) {
                paths.push((a.to_path_buf(), false));
            }
        }
        paths.retain(|(q, _)| q != p);
        paths.push((p.clone(), true));
    }
    // A path both protected and on the way to another stays read-only.
    let ro: Vec<PathBuf> = paths
        .iter()
        .filter(|(_, r)| *r)
        .map(|(p, _)| p.clone())
        .collect();
    paths.retain(|(p, r)| *r || !ro.contains(p));
    paths.sort_by_key(|(p, _)| p.components().count());
    let mut mounts = Vec::new();
    for (path, read_only) in paths {
        let c_path = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| format!("{}: a NUL byte in the path", path.display()))?;
        let locked = if read_only { locked_flags(&c_path) } else { 0 };
        mounts.push(MountOp {
            path,
            c_path,
            read_only,
            locked,
        });
    }
    // SAFETY: geteuid/getegid cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    // The child writes its own maps, so it may map only its own ids (root
    // too: it has no capability left in the namespace it came from).
    let map = |id: u32| format!("{id} {id} 1\n").into_bytes();
    Ok(NsPlan {
        uid_map: map(uid),
        gid_map: map(gid),
        mounts,
    })
}

/// Builds the namespace of `plan` in a helper process (`program -c 'read
/// _'`, alive until its stdin closes) and keeps descriptors of it; the
/// helper is then ended. The kernel's refusal is the error, in words.
pub fn namespace(plan: NsPlan, fail_at: Option<Step>, program: &Path) -> Result<Namespace, String> {
    use std::os::unix::process::CommandExt;
    let plan = std::sync::Arc::new(plan);
    let mut cmd = std::process::Command::new(program);
    cmd.args(["-c", "read _"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let p = std::sync::Arc::clone(&plan);
    // SAFETY: build_namespace makes only async-signal-safe system calls on
    // the plan, prepared here and kept alive by the `Arc`.
    unsafe {
        cmd.pre_exec(move || super::child::build_namespace(&p, fail_at));
    }
    let spawned = cmd.spawn();
    drop(cmd);
    let mut helper = spawned.map_err(|e| {
        super::child::describe(&e, Some(&plan), fail_at).unwrap_or_else(|| {
            format!(
                "cannot start {} to build the namespace: {e}",
                program.display()
            )
        })
    })?;
    let open = |name: &str| {
        std::fs::File::open(format!("/proc/{}/ns/{name}", helper.id()))
            .map(OwnedFd::from)
            .map_err(|e| format!("cannot hold the sandbox's {name} namespace: {e}"))
    };
    let fds = open("user").and_then(|u| open("mnt").map(|m| (u, m)));
    drop(helper.stdin.take());
    let _ = helper.kill();
    let _ = helper.wait();
    let (user, mnt) = fds?;
    let plan = std::sync::Arc::try_unwrap(plan)
        .map_err(|_| "the namespace plan is still in use".to_string())?;
    Ok(Namespace { user, mnt, plan })
}

/// The flags of the mount holding `path` that a read-only re-mount must
/// keep (nosuid, nodev, noexec and the atime ones).
fn locked_flags(path: &CString) -> libc::c_ulong {
    // SAFETY: an all-zero statvfs is a valid output buffer.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a buffer of the right type.
    if unsafe { libc::statvfs(path.as_ptr(), &mut st) } != 0 {
        return 0;
    }
    let map = [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ];
    map.iter()
        .filter(|(st_flag, _)| st.f_flag & st_flag != 0)
        .fold(0, |acc, (_, ms)| acc | ms)
}

/// The highest capability number (`/proc/sys/kernel/cap_last_cap`; 40 on
/// current kernels when it cannot be read).
pub fn cap_last() -> libc::c_int {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(40)
}

/// The step the test switch names, if any.
pub fn forced_failure() -> Option<Step> {
    let v = std::env::var(TEST_FAIL_VAR).ok()?;
    Step::ALL.into_iter().find(|s| s.name() == v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_granted_around_the_hidden_paths_only() {
        let t = tempfile::tempdir().unwrap();
        let r = std::fs::canonicalize(t.path()).unwrap();
        for d in [
            "home/.ssh",
            "home/.config/gcloud",
            "home/.config/other",
            "home/proj",
        ] {
            std::fs::create_dir_all(r.join(d)).unwrap();
        }
        std::fs::write(r.join("home/.netrc"), "x").unwrap();
        std::os::unix::fs::symlink(r.join("home/.ssh"), r.join("home/link")).unwrap();
        let hidden = vec![
            r.join("home/.ssh"),
            r.join("home/.config/gcloud"),
            r.join("home/.netrc"),
        ];
        let g = read_grants(&hidden);
        assert!(g.contains(&r.join("home/proj")));
        assert!(g.contains(&r.join("home/.config/other")));
        for not in [
            "home/.ssh",
            "home/.netrc",
            "home/.config",
            "home/.config/gcloud",
            "home",
            "home/link",
        ] {
            assert!(!g.contains(&r.join(not)), "{not} granted");
        }
        // Every other entry of `/` is granted whole.
        assert!(g.contains(&PathBuf::from("/usr")));
    }

    #[test]
    fn the_namespace_binds_outermost_first_and_keeps_protected_paths_read_only() {
        let t = tempfile::tempdir().unwrap();
        let r = std::fs::canonicalize(t.path()).unwrap();
        std::fs::create_dir_all(r.join("tmp/a/ws/.git/hooks")).unwrap();
        std::fs::write(r.join("tmp/a/ws/.git/config"), "").unwrap();
        let ws = r.join("tmp/a/ws");
        let plan = ns_plan(
            &[
                ws.join(".git/hooks"),
                ws.join(".git/config"),
                ws.join(".pi"),
            ],
            &[r.join("tmp"), ws.clone()],
        )
        .unwrap();
        let got: Vec<(PathBuf, bool)> = plan
            .mounts
            .iter()
            .map(|m| (m.path.clone(), m.read_only))
            .collect();
        assert_eq!(
            got,
            vec![
                (r.join("tmp/a"), false),
                (ws.clone(), false),
                (ws.join(".git"), false),
                (ws.join(".git/hooks"), true),
                (ws.join(".git/config"), true),
            ],
            "the missing .pi is not mounted"
        );
    }

    #[test]
    fn seccomp_program_builds_with_and_without_network() {
        assert!(!seccomp(false).unwrap().is_empty());
        assert!(seccomp(false).unwrap().len() > seccomp(true).unwrap().len());
    }
}
