//! Finding session files: by path, or by a unique id prefix among the
//! session folders (an ambiguous prefix is an error naming the candidates).

use std::io::Read;
use std::path::{Path, PathBuf};

/// Every `*.jsonl` file one folder down from `root` (pi's `--<cwd>--`
/// folders), plus those directly in `root` when `include_top` is set.
/// Sorted by path. pi's own `listAll()` ignores files lying directly in
/// `sessions/`, so the default listing does too.
pub fn session_files_in(root: &Path, include_top: bool) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(root)? {
        let entry = entry?;
        let path = entry.path();
        let ft = entry.file_type()?;
        if ft.is_dir() || (ft.is_symlink() && path.is_dir()) {
            if let Ok(rd) = std::fs::read_dir(&path) {
                for sub in rd.flatten() {
                    let p = sub.path();
                    if is_jsonl(&p) && p.is_file() {
                        out.push(p);
                    }
                }
            }
        } else if include_top && is_jsonl(&path) {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

/// Every session file under `root`, top level included (for id lookups).
pub fn session_files(root: &Path) -> std::io::Result<Vec<PathBuf>> {
    session_files_in(root, true)
}

fn is_jsonl(p: &Path) -> bool {
    p.extension().is_some_and(|e| e == "jsonl")
}

/// Reads the first line of a file (at most 1 MiB) and returns the header's
/// `id` when it is a session header.
pub fn header_id(path: &Path) -> Option<String> {
    let mut f = std::fs::File::open(path).ok()?;
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
    #[error("session id prefix {prefix} is ambiguous: it matches {}", candidates.iter().map(|(id, p)| format!("{id} ({})", p.display())).collect::<Vec<_>>().join(", "))]
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

/// Resolves `reference` — an existing path, else an id prefix searched in
/// `roots` — to one session file.
pub fn resolve(reference: &str, roots: &[PathBuf]) -> Result<PathBuf, ResolveError> {
    let as_path = Path::new(reference);
    if as_path.is_file() {
        return Ok(as_path.to_path_buf());
    }
    if reference.contains('/') || reference.ends_with(".jsonl") || reference.is_empty() {
        return Err(ResolveError::NotFound(reference.to_string()));
    }
    let mut candidates: Vec<(String, PathBuf)> = Vec::new();
    for root in roots {
        let files = match session_files(root) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(source) => {
                return Err(ResolveError::Io {
                    path: root.clone(),
                    source,
                })
            }
        };
        for f in files {
            // Cheap filter on the file name (`<ts>_<id>.jsonl`) before
            // opening; files named otherwise are checked by their header.
            let stem = f
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let name_id = stem.rsplit_once('_').map(|(_, id)| id.to_string());
            if let Some(nid) = &name_id {
                if uuid_like(nid) && !nid.starts_with(reference) {
                    continue;
                }
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
            Err(ResolveError::Ambiguous {
                prefix: reference.to_string(),
                candidates,
            })
        }
    }
}

fn uuid_like(s: &str) -> bool {
    s.len() == 36 && s.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}
