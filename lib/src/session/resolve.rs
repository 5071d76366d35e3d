//! Finding session files: by path, or by a unique id prefix among the
//! session folders (an ambiguous prefix is an error naming the candidates).

use std::io::Read;
use std::path::{Path, PathBuf};

use super::file::{open_regular, probe, regular_or_why, Skipped};

/// The session files of a folder tree, and the `*.jsonl` entries left out
/// because they are not regular files (a FIFO, a device, a folder, a
/// dangling symlink): never opened, reported so the user sees why.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionFiles {
    pub files: Vec<PathBuf>,
    pub skipped: Vec<Skipped>,
}

impl SessionFiles {
    fn add_folder(&mut self, dir: &Path) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in rd.flatten() {
            let path = entry.path();
            if is_jsonl(&path) {
                if let Ok(ft) = entry.file_type() {
                    self.add(path, ft);
                }
            }
        }
    }

    fn add(&mut self, path: PathBuf, ft: std::fs::FileType) {
        match regular_or_why(&path, ft) {
            Ok(()) => self.files.push(path),
            Err(reason) => self.skipped.push(Skipped { path, reason }),
        }
    }

    fn sort(mut self) -> Self {
        sort_entries(&mut self.files);
        self.skipped.sort_by(|a, b| a.path.cmp(&b.path));
        self
    }
}

/// Every `*.jsonl` file one folder down from `root` (pi's `--<cwd>--`
/// folders), plus those directly in `root` when `include_top` is set.
/// Sorted by path. pi's own `listAll()` ignores files lying directly in
/// `sessions/`, so the default listing does too.
pub fn session_files_in(root: &Path, include_top: bool) -> std::io::Result<SessionFiles> {
    let mut out = SessionFiles::default();
    for entry in std::fs::read_dir(root)? {
        let entry = entry?;
        let path = entry.path();
        let ft = entry.file_type()?;
        if ft.is_dir() || (ft.is_symlink() && path.is_dir()) {
            out.add_folder(&path);
        } else if include_top && is_jsonl(&path) {
            out.add(path, ft);
        }
    }
    Ok(out.sort())
}

/// The `*.jsonl` files directly in `dir` (one project's folder).
pub fn session_files_flat(dir: &Path) -> std::io::Result<SessionFiles> {
    std::fs::read_dir(dir)?;
    let mut out = SessionFiles::default();
    out.add_folder(dir);
    Ok(out.sort())
}

/// Every session file under `root`, top level included (for id lookups).
pub fn session_files(root: &Path) -> std::io::Result<SessionFiles> {
    session_files_in(root, true)
}

/// Sorts paths made by joining folder entry names onto one root in
/// `Path`'s own order (component by component): past their common bytes, a
/// separator sorts before any other byte, as a shorter component does. Each
/// path's key is its bytes with the separator made the lowest byte (`\0`,
/// which no path holds), built once and compared as plain bytes; parsing
/// both paths into components at each of a sort's comparisons dominated
/// sorting thousands of session files.
fn sort_entries(files: &mut [PathBuf]) {
    use std::os::unix::ffi::OsStrExt;
    files.sort_by_cached_key(|p| {
        let mut key = p.as_os_str().as_bytes().to_vec();
        for c in &mut key {
            if *c == b'/' {
                *c = 0;
            }
        }
        key
    });
}

fn is_jsonl(p: &Path) -> bool {
    p.extension().is_some_and(|e| e == "jsonl")
}

/// The folders searched for session files and id prefixes: `session_dir`
/// (`--session-dir`), else pi's sessions folder.
pub fn roots(session_dir: Option<&Path>) -> Vec<PathBuf> {
    match session_dir {
        Some(d) => vec![d.to_path_buf()],
        None => vec![crate::paths::sessions_root()],
    }
}

/// The session files a listing looks at, what was left out, and where it
/// looked, in words.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Listing {
    pub files: Vec<PathBuf>,
    pub skipped: Vec<Skipped>,
    pub what: String,
}

/// The session files of every project (`all`: pi's per-cwd folders, and
/// the top of `session_dir` too, which may be flat) or of the project in
/// `cwd` (default: the current directory), under `session_dir` or pi's
/// sessions folder. A missing folder lists nothing, unless `session_dir`
/// named it.
pub fn listing(
    session_dir: Option<&Path>,
    all: bool,
    cwd: Option<&Path>,
) -> Result<Listing, String> {
    let (dir, what) = if all {
        let root = session_dir.map_or_else(crate::paths::sessions_root, Path::to_path_buf);
        let what = root.display().to_string();
        (root, what)
    } else {
        let cwd = match cwd {
            Some(c) => c
                .canonicalize()
                .map_err(|e| format!("{}: {e}", c.display()))?,
            None => std::env::current_dir().map_err(|e| format!("current directory: {e}"))?,
        };
        let cwd_s = cwd.to_string_lossy().into_owned();
        match session_dir {
            Some(d) => (d.to_path_buf(), d.display().to_string()),
            None => {
                let d = crate::paths::sessions_root().join(crate::paths::encode_cwd(&cwd_s));
                let what = format!("{} (sessions of {cwd_s})", d.display());
                (d, what)
            }
        }
    };
    if !dir.exists() {
        if session_dir.is_some() {
            return Err(format!("{}: no such directory", dir.display()));
        }
        return Ok(Listing {
            what,
            ..Listing::default()
        });
    }
    if !dir.is_dir() {
        return Err(format!("{}: not a directory", dir.display()));
    }
    let found = if all {
        // Like pi's listAll(): the per-cwd folders only, unless the user
        // pointed --session-dir at a folder that may be flat.
        session_files_in(&dir, session_dir.is_some())
    } else {
        session_files_flat(&dir)
    }
    .map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(Listing {
        files: found.files,
        skipped: found.skipped,
        what,
    })
}

/// Every session file under `roots` (their top level included) and
/// directly in `dir`, sorted, each once; folders that cannot be read are
/// passed over.
pub fn files_around(roots: &[PathBuf], dir: Option<&Path>) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for root in roots {
        if let Ok(f) = session_files(root) {
            files.extend(f.files);
        }
    }
    if let Some(dir) = dir {
        if let Ok(f) = session_files_flat(dir) {
            files.extend(f.files);
        }
    }
    files.sort();
    files.dedup();
    files
}

/// Reads the first line of a file (at most 1 MiB) and returns the header's
/// `id` when it is a session header.
pub fn header_id(path: &Path) -> Option<String> {
    let mut f = open_regular(path, false).ok()?;
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        let n = f.read(&mut chunk).ok()?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        if memchr::memchr(b'\n', &chunk[..n]).is_some() || buf.len() > 1 << 20 {
            break;
        }
    }
    let end = memchr::memchr(b'\n', &buf).unwrap_or(buf.len());
    let v: serde_json::Value = serde_json::from_slice(&buf[..end]).ok()?;
    if v.get("type")?.as_str()? != "session" {
        return None;
    }
    v.get("id")?.as_str().map(str::to_string)
}

/// Why a session reference could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error("{0}: no such file or session id")]
    NotFound(String),
    /// The path exists (or cannot be reached) but is no session file: says
    /// what it is (a directory, a FIFO, a symlink loop, under a file).
    #[error("{reference}: {what}")]
    NotAFile { reference: String, what: String },
    #[error(
        "session id prefix {prefix} is ambiguous: it matches {}",
        list_candidates(candidates)
    )]
    Ambiguous {
        prefix: String,
        candidates: Vec<(String, PathBuf)>,
    },
    #[error("{path}: cannot read session folder: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The candidates an ambiguous prefix names (see
/// [`super::prefixes::some_of`]).
fn list_candidates(candidates: &[(String, PathBuf)]) -> String {
    super::prefixes::some_of(
        candidates
            .iter()
            .map(|(id, p)| format!("{id} ({})", p.display())),
    )
}

/// Whether `reference` is meant as a path rather than an id prefix.
pub fn looks_like_path(reference: &str) -> bool {
    reference.contains('/') || reference.ends_with(".jsonl")
}

/// Resolves `reference` — an existing path, else an id prefix searched in
/// `roots` — to one session file. Files the id search cannot open (a FIFO
/// named like a session, a dangling link) are passed to `on_skip` and left
/// out.
pub fn resolve(
    reference: &str,
    roots: &[PathBuf],
    on_skip: &mut dyn FnMut(&Skipped),
) -> Result<PathBuf, ResolveError> {
    let as_path = Path::new(reference);
    match probe(as_path) {
        Ok(true) => return Ok(as_path.to_path_buf()),
        Err(what) if !reference.is_empty() => {
            return Err(ResolveError::NotAFile {
                reference: reference.to_string(),
                what,
            })
        }
        _ => {}
    }
    if looks_like_path(reference) || reference.is_empty() {
        return Err(ResolveError::NotFound(reference.to_string()));
    }
    let mut candidates: Vec<(String, PathBuf)> = Vec::new();
    for root in roots {
        let found = match session_files(root) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(source) => {
                return Err(ResolveError::Io {
                    path: root.clone(),
                    source,
                })
            }
        };
        for skip in &found.skipped {
            if may_hold(&skip.path, reference) {
                on_skip(skip);
            }
        }
        for f in found.files {
            // Cheap filter on the file name (`<ts>_<id>.jsonl`) before
            // opening; files named otherwise are checked by their header.
            if !may_hold(&f, reference) {
                continue;
            }
            if let Some(id) = header_id(&f) {
                if id.starts_with(reference) && !candidates.iter().any(|(_, p)| p == &f) {
                    candidates.push((id, f));
                }
            }
        }
    }
    match candidates.len() {
        0 => Err(ResolveError::NotFound(reference.to_string())),
        1 => Ok(candidates.remove(0).1),
        _ => {
            // An exact id match wins over longer ids sharing the prefix.
            if let Some(exact) = candidates.iter().position(|(id, _)| id == reference) {
                return Ok(candidates.remove(exact).1);
            }
            candidates.sort();
            Err(ResolveError::Ambiguous {
                prefix: reference.to_string(),
                candidates,
            })
        }
    }
}

/// Whether a file named like pi's `<ts>_<uuid>.jsonl` can hold a session
/// whose id starts with `prefix` (files named otherwise might).
fn may_hold(path: &Path, prefix: &str) -> bool {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    match stem.rsplit_once('_') {
        Some((_, id)) if uuid_like(id) => id.starts_with(prefix),
        _ => true,
    }
}

/// Whether `s` has a UUID's shape (36 hex digits and dashes).
pub(crate) fn uuid_like(s: &str) -> bool {
    s.len() == 36 && s.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_sort_in_the_order_of_paths() {
        // Bytes below and around the separator, prefixes of one another,
        // pi's `--cwd--` folder names, non-ASCII: sorted by bytes these
        // would put `--a---b--/x` before `--a--/x`; paths do the opposite.
        let names = [
            "--a--",
            "--a---b--",
            "--a--b",
            "a",
            "a.jsonl",
            "a-b",
            "a b",
            "a!",
            "a/",
            "ab",
            "a0",
            "A",
            "é",
            "~",
            "-",
            ".x",
            "a.jsonl.jsonl",
        ];
        for root in ["/r", "/r/", "rel/./x", "."] {
            let mut paths: Vec<PathBuf> = Vec::new();
            for d in names.iter().filter(|n| !n.ends_with('/')) {
                paths.push(Path::new(root).join(d));
                for f in names.iter().filter(|n| !n.ends_with('/')) {
                    paths.push(Path::new(root).join(d).join(f));
                }
            }
            let mut by_path = paths.clone();
            by_path.sort();
            let mut ours = paths;
            sort_entries(&mut ours);
            assert_eq!(ours, by_path, "root {root}");
        }
    }
}
