//! The part of confinement that runs in the child between fork and exec
//! (`pre_exec`): only async-signal-safe system calls on data prepared in
//! the parent ([`super::kernel::Kernel`]) — no allocation, no lock. A
//! failing step returns an error whose number encodes the step, the mount
//! it was at and the errno, since a number is all that crosses back to
//! the parent; [`describe`] turns it into a sentence there.

use std::ffi::CStr;
use std::io;

use super::kernel::{Kernel, NsPlan, Step};

/// `SECBIT_NOROOT | SECBIT_NOROOT_LOCKED`: root gains no capabilities on
/// exec, for good.
const SECBITS_NOROOT: libc::c_ulong = 0b11;

/// The error for `step` at `index` (a mount's position + 1, or the map
/// file) with `errno`.
fn fail(step: Step, index: usize, errno: i32) -> io::Error {
    let index = index.min(0xffff) as i32;
    io::Error::from_raw_os_error(((step as i32) << 24) | (index << 8) | errno.clamp(0, 255))
}

fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EINVAL)
}

/// Builds the namespace of `plan` in the calling (child) process: a new
/// user and mount namespace, its id maps, and the mounts. Runs once per
/// run, in the helper whose namespace every command then joins.
/// Async-signal-safe.
pub fn build_namespace(plan: &NsPlan, fail_at: Option<Step>) -> io::Result<()> {
    if fail_at == Some(Step::Userns) {
        return Err(fail(Step::Userns, 0, libc::EPERM));
    }
    // SAFETY: unshare only changes this (single-threaded, forked) process.
    if unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) } != 0 {
        return Err(fail(Step::Userns, 0, errno()));
    }
    let maps: [(&CStr, &[u8]); 3] = [
        (c"/proc/self/setgroups", b"deny"),
        (c"/proc/self/uid_map", &plan.uid_map),
        (c"/proc/self/gid_map", &plan.gid_map),
    ];
    for (i, (file, text)) in maps.iter().enumerate() {
        write_file(file, text).map_err(|e| fail(Step::Userns, i + 1, e))?;
    }
    if fail_at == Some(Step::Mount) {
        return Err(fail(Step::Mount, 0, libc::EPERM));
    }
    // Nothing mounted here may reach the namespace it was copied from.
    mount(None, c"/", libc::MS_REC | libc::MS_PRIVATE).map_err(|e| fail(Step::Mount, 0, e))?;
    for (i, m) in plan.mounts.iter().enumerate() {
        let p = m.c_path.as_c_str();
        mount(Some(p), p, libc::MS_BIND | libc::MS_REC).map_err(|e| fail(Step::Mount, i + 1, e))?;
        if m.read_only {
            mount(
                None,
                p,
                libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | m.locked,
            )
            .map_err(|e| fail(Step::Mount, i + 1, e))?;
        }
    }
    Ok(())
}

/// Confines the calling (child) process, whose working directory is `cwd`,
/// with `k`: it joins the run's namespace (if any), loses every
/// capability, and installs the Landlock ruleset and the seccomp program.
/// Async-signal-safe.
pub fn install(k: &Kernel, cwd: &CStr) -> io::Result<()> {
    let forced = |s: Step| k.fail == Some(s);
    if let Some(ns) = &k.ns {
        use std::os::fd::AsRawFd;
        // SAFETY: setns on descriptors the parent holds open.
        if unsafe { libc::setns(ns.user.as_raw_fd(), libc::CLONE_NEWUSER) } != 0 {
            return Err(fail(Step::Userns, SETNS, errno()));
        }
        // SAFETY: as above.
        if unsafe { libc::setns(ns.mnt.as_raw_fd(), libc::CLONE_NEWNS) } != 0 {
            return Err(fail(Step::Mount, SETNS, errno()));
        }
        // Joining a mount namespace moves the working directory to its
        // root; enter the command's directory again, through the mounts.
        // SAFETY: a NUL-terminated path.
        if unsafe { libc::chdir(cwd.as_ptr()) } != 0 {
            return Err(fail(Step::Mount, CHDIR, errno()));
        }
    }
    if k.drop_caps || k.ns.is_some() {
        if forced(Step::Caps) {
            return Err(fail(Step::Caps, 0, libc::EPERM));
        }
        drop_capabilities(k.cap_last).map_err(|e| fail(Step::Caps, 0, e))?;
    }
    if forced(Step::Landlock) {
        return Err(fail(Step::Landlock, 0, libc::EPERM));
    }
    // SAFETY: prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(fail(Step::Landlock, 0, errno()));
    }
    use std::os::fd::AsRawFd;
    // SAFETY: landlock_restrict_self(ruleset fd, 0) takes no memory.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_restrict_self,
            k.landlock.as_raw_fd(),
            0u32,
        )
    };
    if rc != 0 {
        return Err(fail(Step::Landlock, 0, errno()));
    }
    if forced(Step::Seccomp) {
        return Err(fail(Step::Seccomp, 0, libc::EPERM));
    }
    seccompiler::apply_filter(&k.bpf).map_err(|e| {
        let n = match e {
            seccompiler::Error::Prctl(io) | seccompiler::Error::Seccomp(io) => {
                io.raw_os_error().unwrap_or(libc::EINVAL)
            }
            _ => libc::EINVAL,
        };
        fail(Step::Seccomp, 0, n)
    })
}

/// The index of a failed `setns` in an error.
const SETNS: usize = 0xfffe;
/// The index of a failed `chdir` in an error.
const CHDIR: usize = 0xffff;

/// `mount(source, target, NULL, flags, NULL)`; the errno on failure.
fn mount(source: Option<&CStr>, target: &CStr, flags: libc::c_ulong) -> Result<(), i32> {
    let src = source.map_or(std::ptr::null(), CStr::as_ptr);
    // SAFETY: NUL-terminated paths (or NULL), no data argument.
    let rc = unsafe {
        libc::mount(
            src,
            target.as_ptr(),
            std::ptr::null(),
            flags,
            std::ptr::null(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(errno())
    }
}

/// Writes `text` to `file` in one `write`; the errno on failure.
fn write_file(file: &CStr, text: &[u8]) -> Result<(), i32> {
    // SAFETY: a NUL-terminated path.
    let fd = unsafe { libc::open(file.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(errno());
    }
    // SAFETY: `text` is valid for its length; `fd` is ours.
    let n = unsafe { libc::write(fd, text.as_ptr().cast(), text.len()) };
    let e = errno();
    // SAFETY: closing our own descriptor.
    unsafe { libc::close(fd) };
    if n == text.len() as isize {
        Ok(())
    } else {
        Err(e)
    }
}

/// No capability survives the exec: the ambient set is cleared, root gains
/// none from its uid, and the bounding set is emptied.
fn drop_capabilities(cap_last: libc::c_int) -> Result<(), i32> {
    // SAFETY: prctl with integer arguments throughout.
    unsafe {
        if libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        ) != 0
        {
            return Err(errno());
        }
        if libc::prctl(libc::PR_SET_SECUREBITS, SECBITS_NOROOT, 0, 0, 0) != 0 {
            return Err(errno());
        }
        for cap in 0..=cap_last {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno() != libc::EINVAL {
                return Err(errno());
            }
        }
    }
    Ok(())
}

/// What failed, as a sentence, when `e` came from [`install`] or
/// [`build_namespace`] (`plan`: the namespace's mounts, `fail_at`: the test
/// switch); `None` for any other spawn error.
pub fn describe(e: &io::Error, plan: Option<&NsPlan>, fail_at: Option<Step>) -> Option<String> {
    let code = e.raw_os_error()?;
    let step = Step::ALL.into_iter().find(|s| *s as i32 == code >> 24)?;
    let index = ((code >> 8) & 0xffff) as usize;
    let errno = io::Error::from_raw_os_error(code & 0xff);
    let forced = if fail_at == Some(step) {
        format!(" (forced by {})", super::kernel::TEST_FAIL_VAR)
    } else {
        String::new()
    };
    let what = match step {
        Step::Userns => {
            let part = match index {
                SETNS => "setns",
                i => [
                    "unshare",
                    "/proc/self/setgroups",
                    "/proc/self/uid_map",
                    "/proc/self/gid_map",
                ]
                .get(i)
                .copied()
                .unwrap_or("unshare"),
            };
            format!(
                "unprivileged user namespaces are unavailable ({part}: {errno}{forced}); on Ubuntu 24.04 allow them with `sysctl kernel.apparmor_restrict_unprivileged_userns=0`, in Docker with `--security-opt seccomp=unconfined`, or use --sandbox read-only"
            )
        }
        Step::Mount => {
            let path = match index {
                0 => "/ (private)".to_string(),
                SETNS => "the namespace (setns)".to_string(),
                CHDIR => "the working directory".to_string(),
                i => plan
                    .and_then(|p| p.mounts.get(i - 1))
                    .map(|m| m.path.display().to_string())
                    .unwrap_or_else(|| "?".into()),
            };
            format!("cannot mount {path} read-only in the sandbox's namespace ({errno}{forced})")
        }
        Step::Caps => format!("cannot drop capabilities ({errno}{forced})"),
        Step::Landlock => format!("Landlock refused the ruleset ({errno}{forced})"),
        Step::Seccomp => format!("seccomp refused the filter ({errno}{forced})"),
    };
    Some(what)
}
