//! The directory walk grep and find share: `ignore`'s walker (the one inside
//! ripgrep and fd), hidden files included, sorted by name so results are
//! stable (rg and fd print in thread order).

use std::path::{Path, PathBuf};

use ignore::overrides::OverrideBuilder;
use ignore::WalkBuilder;

/// Walks `root` like `rg --hidden` (`require_git = true`, .gitignore only
/// inside a git repository) or `fd --hidden --no-require-git`
/// (`require_git = false`), optionally filtered by an rg-style `--glob`.
/// Yields (path, is_dir) for everything below `root`, except what the
/// sandbox hides (a hidden directory is not entered; a symlink is judged by
/// what it reaches).
pub fn walk(
    root: &Path,
    require_git: bool,
    glob: Option<&str>,
    sandbox: &std::sync::Arc<crate::sandbox::Sandbox>,
) -> Result<Vec<(PathBuf, bool)>, String> {
    let mut b = WalkBuilder::new(root);
    if sandbox.is_on() {
        let sandbox = std::sync::Arc::clone(sandbox);
        let root = root.to_path_buf();
        let real_root = crate::sandbox::paths::resolve(&root);
        b.filter_entry(move |e| {
            let real = if e.path_is_symlink() {
                crate::sandbox::paths::resolve(e.path())
            } else {
                match e.path().strip_prefix(&root) {
                    Ok(rel) => real_root.join(rel),
                    Err(_) => crate::sandbox::paths::resolve(e.path()),
                }
            };
            !sandbox.hides(&real)
        });
    }
    b.hidden(false)
        .require_git(require_git)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b));
    if require_git {
        b.add_custom_ignore_filename(".rgignore");
    } else {
        b.add_custom_ignore_filename(".fdignore");
    }
    if let Some(g) = glob {
        let mut o = OverrideBuilder::new(root);
        o.add(g).map_err(|e| e.to_string())?;
        b.overrides(o.build().map_err(|e| e.to_string())?);
    }
    let mut out = Vec::new();
    for entry in b.build().flatten() {
        if entry.depth() == 0 {
            continue;
        }
        let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
        out.push((entry.into_path(), is_dir));
    }
    Ok(out)
}

/// `path` relative to `root` with `/` separators.
pub fn rel_posix(path: &Path, root: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}
