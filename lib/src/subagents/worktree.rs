//! `isolation: "worktree"` for a child (pi-web's worktree isolation): a
//! fresh git worktree on a new branch `pi-web-agent-<uuid>` under
//! `<main repo root>-worktrees/`, which becomes the child's cwd, and its
//! removal when the run ends — without `--force`, so a dirty tree is kept and
//! the reason recorded (`Worktree retained at <path>: <git error>`). A tree
//! removed cleanly takes its branch with it when the branch holds no commit
//! the repository's HEAD lacks (`git branch -d`; pi-web keeps every
//! branch): whatever the child committed survives on its branch.
//! git runs with `LC_ALL=C`, no stdin and a 5-minute limit. git's own
//! worktree bookkeeping is not safe against itself: two `git worktree add`
//! at once can fail with `failed to read .git/worktrees/<other>/commondir`
//! while the other entry is half written, so every worktree mutation runs
//! under one lock: [`WORKTREE_LOCK`] for the threads of this process
//! (parallel `Agent` calls) and an `flock` on the repository's git directory
//! for other processes (two `pi-run`s in one repository). Locking the
//! directory itself leaves no lock file behind.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A worktree made for one child.
#[derive(Debug, Clone, PartialEq)]
pub struct Worktree {
    /// The main repository's root (realpath).
    pub root: PathBuf,
    pub path: PathBuf,
    pub branch: String,
}

const GIT_LIMIT: Duration = Duration::from_secs(300);

/// Serialises `git worktree add` / `remove` within the process.
static WORKTREE_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Held while a worktree of one repository changes: this process's mutex,
/// then the `flock` on the repository's git directory (released on drop).
struct Serial {
    _dir: Option<std::fs::File>,
    _process: std::sync::MutexGuard<'static, ()>,
}

/// Takes both locks for the repository at `root`. A git directory that
/// cannot be opened or locked (a file system without `flock`) leaves only
/// the process lock; a lock another process holds past [`GIT_LIMIT`] is an
/// error naming the directory.
fn serial(root: &Path) -> Result<Serial, String> {
    // A panic elsewhere while holding it leaves nothing to repair.
    let process = WORKTREE_LOCK
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = git_common_dir(root).and_then(|d| std::fs::File::open(&d).ok().map(|f| (d, f)));
    let Some((path, dir)) = dir else {
        return Ok(Serial {
            _dir: None,
            _process: process,
        });
    };
    let start = Instant::now();
    loop {
        match dir.try_lock() {
            Ok(()) => break,
            Err(std::fs::TryLockError::WouldBlock) if start.elapsed() < GIT_LIMIT => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(format!(
                    "another process kept {} locked for {} s while changing worktrees",
                    path.display(),
                    GIT_LIMIT.as_secs()
                ));
            }
            Err(std::fs::TryLockError::Error(_)) => {
                return Ok(Serial {
                    _dir: None,
                    _process: process,
                });
            }
        }
    }
    Ok(Serial {
        _dir: Some(dir),
        _process: process,
    })
}

/// The git directory shared by every worktree of the repository at `root`:
/// `root/.git` when it is one, else what git says.
fn git_common_dir(root: &Path) -> Option<PathBuf> {
    let dot = root.join(".git");
    if dot.is_dir() {
        return Some(dot);
    }
    let out = git(root, &["rev-parse", "--git-common-dir"]).ok()?;
    let d = PathBuf::from(out.trim());
    Some(if d.is_absolute() { d } else { root.join(d) })
}

/// Runs git in `dir`; stdout on success, trimmed stderr otherwise.
fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let mut child = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run git: {e}"))?;
    // Read both pipes on threads so a chatty git never blocks on a full pipe.
    fn drain<R: std::io::Read + Send + 'static>(p: Option<R>) -> std::thread::JoinHandle<String> {
        std::thread::spawn(move || {
            let mut s = Vec::new();
            if let Some(mut p) = p {
                let _ = p.read_to_end(&mut s);
            }
            String::from_utf8_lossy(&s).into_owned()
        })
    }
    let (o, e) = (drain(child.stdout.take()), drain(child.stderr.take()));
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Ok(s),
            Ok(None) if start.elapsed() > GIT_LIMIT => {
                let _ = child.kill();
                let _ = child.wait();
                break Err(format!("git {} timed out", args.join(" ")));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => break Err(format!("git: {e}")),
        }
    };
    let (o, e) = (o.join().unwrap_or_default(), e.join().unwrap_or_default());
    let status = status?;
    if status.success() {
        Ok(o)
    } else {
        let e = e.trim();
        Err(if e.is_empty() {
            format!("git {} failed ({status})", args.join(" "))
        } else {
            e.to_string()
        })
    }
}

/// The main repository root of `cwd`: the parent of git's common dir.
pub fn repo_root(cwd: &Path) -> Result<PathBuf, String> {
    let common = git(cwd, &["rev-parse", "--git-common-dir"])?;
    let common = cwd.join(common.trim());
    let common =
        std::fs::canonicalize(&common).map_err(|e| format!("{}: {e}", common.display()))?;
    common
        .parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| format!("no repository root above {}", common.display()))
}

/// A branch name as a directory name: `/ \ : * ? " < > |` and whitespace
/// runs become `-`, leading and trailing `-` go.
pub fn sanitize(branch: &str) -> String {
    let mut out = String::new();
    let mut dash = false;
    for c in branch.chars() {
        if c.is_whitespace() || "/\\:*?\"<>|".contains(c) {
            if !dash {
                out.push('-');
            }
            dash = true;
        } else {
            out.push(c);
            dash = false;
        }
    }
    out.trim_matches('-').to_string()
}

/// Creates a worktree for a child of a session in `cwd`.
pub fn create(cwd: &Path) -> Result<Worktree, String> {
    let root = repo_root(cwd)?;
    let branch = format!("pi-web-agent-{}", uuid::Uuid::new_v4());
    create_branch(&root, &branch)
}

fn create_branch(root: &Path, branch: &str) -> Result<Worktree, String> {
    if branch.trim().is_empty() {
        return Err("Branch name is required".into());
    }
    let dir_name = sanitize(branch);
    if dir_name.is_empty() || dir_name == "." || dir_name == ".." {
        return Err(format!("Invalid branch name: {branch}"));
    }
    let base = match root.file_name() {
        Some(n) => root.with_file_name(format!("{}-worktrees", n.to_string_lossy())),
        None => return Err(format!("Invalid branch name: {branch}")),
    };
    let path = base.join(dir_name);
    if path.exists() {
        return Err(format!("Directory already exists: {}", path.display()));
    }
    let p = path.display().to_string();
    let _serial = serial(root)?;
    let remote = format!("refs/remotes/origin/{branch}");
    let has_remote = git(root, &["show-ref", "--verify", "--quiet", &remote]).is_ok();
    let exists = git(
        root,
        &[
            "show-ref",
            "--verify",
            "--quiet",
            &format!("refs/heads/{branch}"),
        ],
    )
    .is_ok();
    if exists {
        git(root, &["worktree", "add", "--", &p, branch])?;
    } else if has_remote {
        git(root, &["worktree", "add", "-b", branch, "--", &p, &remote])?;
    } else {
        git(root, &["worktree", "add", "-b", branch, "--", &p])?;
    }
    Ok(Worktree {
        root: root.to_path_buf(),
        path,
        branch: branch.to_string(),
    })
}

/// Removes the worktree without force; the error says why it was kept.
pub fn remove(wt: &Worktree) -> Result<(), String> {
    let _serial = serial(&wt.root)?;
    let list = git(&wt.root, &["worktree", "list", "--porcelain"])?;
    let listed: Vec<&str> = list
        .lines()
        .filter_map(|l| l.strip_prefix("worktree "))
        .collect();
    let p = wt.path.display().to_string();
    match listed.iter().position(|l| *l == p) {
        None => return Err(format!("Not a worktree of this repository: {p}")),
        Some(0) => return Err("Cannot remove the main worktree".into()),
        Some(_) => {}
    }
    git(&wt.root, &["worktree", "remove", &p]).map(|_| ())
}

/// What removing a child's worktree did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cleanup {
    /// The tree was kept: the `worktreeCleanupError` text.
    pub error: Option<String>,
    /// The branch was deleted with the tree.
    pub branch_removed: bool,
}

/// Removes the worktree at the end of a run (or of a start that failed),
/// and then its branch unless the branch holds commits HEAD lacks.
pub fn cleanup(wt: &Worktree) -> Cleanup {
    match remove(wt) {
        Err(e) => Cleanup {
            error: Some(format!("Worktree retained at {}: {e}", wt.path.display())),
            branch_removed: false,
        },
        Ok(()) => Cleanup {
            error: None,
            branch_removed: delete_merged_branch(wt).is_ok(),
        },
    }
}

/// `git branch -d`: refused for a branch with commits not in HEAD.
fn delete_merged_branch(wt: &Worktree) -> Result<(), String> {
    let _serial = serial(&wt.root)?;
    git(&wt.root, &["branch", "-d", &wt.branch]).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> Option<(tempfile::TempDir, PathBuf)> {
        let d = tempfile::tempdir().ok()?;
        let r = d.path().join("repo");
        std::fs::create_dir(&r).ok()?;
        git(&r, &["init", "-q"]).ok()?;
        std::fs::write(r.join("a.txt"), "a").ok()?;
        git(&r, &["add", "a.txt"]).ok()?;
        git(
            &r,
            &[
                "-c",
                "user.email=t@t",
                "-c",
                "user.name=t",
                "commit",
                "-qm",
                "init",
            ],
        )
        .ok()?;
        Some((d, r))
    }

    #[test]
    fn sanitizes_branch_names() {
        assert_eq!(sanitize("a/b c\t\td"), "a-b-c-d");
        assert_eq!(sanitize("/x:*?\"<>|y/"), "x-y");
        assert_eq!(sanitize("pi-web-agent-1"), "pi-web-agent-1");
    }

    #[test]
    fn creates_in_the_sibling_folder_removes_clean_and_keeps_dirty_trees() {
        let Some((_d, r)) = repo() else {
            // CI has git: a missing git there is a failure, not a skip.
            assert!(
                std::env::var_os("CI").is_none(),
                "git is not available (CI=true)"
            );
            eprintln!("SKIP creates_in_the_sibling_folder: git is not available");
            return;
        };
        let sub = r.join("sub");
        std::fs::create_dir(&sub).unwrap();
        let wt = create(&sub).unwrap();
        let root = std::fs::canonicalize(&r).unwrap();
        assert_eq!(wt.root, root);
        assert_eq!(
            wt.path.parent().unwrap(),
            root.with_file_name("repo-worktrees")
        );
        assert!(wt.branch.starts_with("pi-web-agent-"));
        assert!(wt.path.join("a.txt").is_file());
        let has_branch =
            |b: &str| git(&root, &["show-ref", "--verify", &format!("refs/heads/{b}")]).is_ok();
        assert_eq!(
            cleanup(&wt),
            Cleanup {
                error: None,
                branch_removed: true
            }
        );
        assert!(!wt.path.exists());
        // A branch holding nothing new goes with its tree.
        assert!(!has_branch(&wt.branch));

        // One with a commit of the child's stays (the tree was clean).
        let wt = create(&r).unwrap();
        std::fs::write(wt.path.join("b.txt"), "b").unwrap();
        git(&wt.path, &["add", "b.txt"]).unwrap();
        git(
            &wt.path,
            &[
                "-c",
                "user.email=t@t",
                "-c",
                "user.name=t",
                "commit",
                "-qm",
                "child",
            ],
        )
        .unwrap();
        assert_eq!(cleanup(&wt), Cleanup::default());
        assert!(!wt.path.exists());
        assert!(has_branch(&wt.branch));

        let wt = create(&r).unwrap();
        std::fs::write(wt.path.join("a.txt"), "changed").unwrap();
        let err = cleanup(&wt).error.unwrap();
        assert!(
            err.starts_with(&format!("Worktree retained at {}: ", wt.path.display())),
            "{err}"
        );
        assert!(wt.path.is_dir());
        let main = Worktree {
            root: root.clone(),
            path: root.clone(),
            branch: String::new(),
        };
        assert_eq!(
            remove(&main).unwrap_err(),
            "Cannot remove the main worktree"
        );
        let other = Worktree {
            path: root.join("nope"),
            ..main
        };
        assert!(remove(&other)
            .unwrap_err()
            .starts_with("Not a worktree of this repository: "));
        assert_eq!(
            create_branch(&root, " ").unwrap_err(),
            "Branch name is required"
        );
        let not_git = tempfile::tempdir().unwrap();
        assert!(create(not_git.path()).is_err());
    }

    /// Parallel children in one repository: every create succeeds (git alone
    /// fails here now and then, see the module comment) and every clean
    /// tree is removed.
    #[test]
    fn parallel_creates_and_removes_in_one_repository_all_succeed() {
        let Some((_d, r)) = repo() else {
            assert!(
                std::env::var_os("CI").is_none(),
                "git is not available (CI=true)"
            );
            eprintln!("SKIP parallel_creates: git is not available");
            return;
        };
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let r = r.clone();
                std::thread::spawn(move || {
                    let wt = create(&r)?;
                    cleanup(&wt).error.map_or(Ok(()), Err)
                })
            })
            .collect();
        for t in threads {
            assert_eq!(t.join().unwrap(), Ok(()));
        }
    }

    #[test]
    fn a_lock_held_on_the_git_directory_by_another_process_holds_a_create_back() {
        let Some((_d, r)) = repo() else {
            assert!(
                std::env::var_os("CI").is_none(),
                "git is not available (CI=true)"
            );
            eprintln!("SKIP a_lock_held_on_the_git_directory: git is not available");
            return;
        };
        // A second open file description is excluded by `flock` exactly as
        // another process would be.
        let other = std::fs::File::open(r.join(".git")).unwrap();
        other.lock().unwrap();
        let t = {
            let r = r.clone();
            std::thread::spawn(move || create(&r))
        };
        std::thread::sleep(Duration::from_millis(300));
        assert!(!t.is_finished(), "create ran while the git dir was locked");
        assert!(!r.with_file_name("repo-worktrees").exists());
        other.unlock().unwrap();
        let wt = t.join().unwrap().unwrap();
        assert!(wt.path.is_dir());
        assert_eq!(cleanup(&wt).error, None);
        // Nothing is left in the git directory.
        assert!(!r
            .join(".git/worktrees")
            .read_dir()
            .is_ok_and(|mut d| d.next().is_some()));
    }
}
