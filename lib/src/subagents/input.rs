//! `input_files` of an `Agent` call: at most 8 UTF-8 text files, 512 KiB in
//! all, each really inside the parent session's cwd (symlinks are followed
//! and the real path is checked), appended to the delegated task as
//! `<documents>`. This is input preparation, not a tool: it changes neither
//! the child's tools nor its system prompt. Files are opened without
//! following a final symlink and without blocking, and the opened file must
//! be the one that was checked.

use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Component, Path};

/// Most files one call may name.
pub const MAX_FILES: usize = 8;
/// Most bytes all files may hold together.
pub const MAX_BYTES: u64 = 512 * 1024;

/// One loaded file: its real path relative to the cwd (`/`-separated) and
/// its text (a leading BOM dropped).
#[derive(Debug, Clone, PartialEq)]
pub struct InputDocument {
    pub path: String,
    pub content: String,
}

/// Loads `paths` (relative to `cwd` or absolute) with pi-web's checks and
/// exact error texts.
pub fn load(cwd: &Path, paths: &[String]) -> Result<Vec<InputDocument>, String> {
    if paths.len() > MAX_FILES {
        return Err(format!(
            "Agent input_files accepts at most {MAX_FILES} files"
        ));
    }
    let root = std::fs::canonicalize(cwd)
        .map_err(|e| format!("Agent input_files: the session cwd is unavailable: {e}"))?;
    let mut seen: Vec<std::path::PathBuf> = Vec::new();
    let mut docs = Vec::new();
    let mut total: u64 = 0;
    let too_large = || format!("Agent input_files exceeds the {MAX_BYTES}-byte total limit");
    for p in paths {
        if p.trim().is_empty() {
            return Err("Agent input_files paths must not be empty".into());
        }
        let real = std::fs::canonicalize(cwd.join(p))
            .map_err(|_| format!("Agent input file does not exist: {p}"))?;
        if !real.starts_with(&root) {
            return Err(format!("Agent input file is outside the session cwd: {p}"));
        }
        if seen.contains(&real) {
            continue;
        }
        let not_file = || format!("Agent input path is not a file: {p}");
        let checked = std::fs::metadata(&real).map_err(|_| not_file())?;
        if !checked.is_file() {
            return Err(not_file());
        }
        let allowance = MAX_BYTES - total;
        if checked.len() > allowance {
            return Err(too_large());
        }
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(&real)
            .map_err(|_| format!("Agent input file changed during loading: {p}"))?;
        let opened = file.metadata().map_err(|_| not_file())?;
        if !opened.is_file() || opened.dev() != checked.dev() || opened.ino() != checked.ino() {
            return Err(format!("Agent input file changed during loading: {p}"));
        }
        let mut bytes = Vec::new();
        file.take(allowance + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("Agent input file cannot be read: {p}: {e}"))?;
        total += bytes.len() as u64;
        if total > MAX_BYTES {
            return Err(too_large());
        }
        let text = String::from_utf8(bytes)
            .map_err(|_| format!("Agent input file is not valid UTF-8 text: {p}"))?;
        let content = text
            .strip_prefix('\u{feff}')
            .map(str::to_string)
            .unwrap_or(text);
        let rel: Vec<String> = real
            .strip_prefix(&root)
            .unwrap_or(&real)
            .components()
            .filter_map(|c| match c {
                Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
                _ => None,
            })
            .collect();
        seen.push(real);
        docs.push(InputDocument {
            path: rel.join("/"),
            content,
        });
    }
    Ok(docs)
}

/// The task with the documents appended (unchanged when there are none).
pub fn append_documents(task: &str, docs: &[InputDocument]) -> String {
    if docs.is_empty() {
        return task.to_string();
    }
    let parts: Vec<String> = docs
        .iter()
        .map(|d| {
            let quoted =
                serde_json::to_string(&d.path).unwrap_or_else(|_| format!("\"{}\"", d.path));
            format!("<document path={quoted}>\n{}\n</document>", d.content)
        })
        .collect();
    format!(
        "{task}\n\n<documents>\n{}\n</documents>",
        parts.join("\n\n")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, std::path::PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let cwd = d.path().join("cwd");
        std::fs::create_dir_all(cwd.join("docs")).unwrap();
        (d, cwd)
    }

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn a_valid_set_is_appended_exactly() {
        let (_d, cwd) = setup();
        std::fs::write(cwd.join("docs/article.md"), "# Article\n\nEvidence.").unwrap();
        std::fs::write(cwd.join("bom.txt"), "\u{feff}hi").unwrap();
        let docs = load(&cwd, &s(&["docs/article.md", "./docs/article.md"])).unwrap();
        assert_eq!(
            append_documents("Analyze the argument.", &docs),
            "Analyze the argument.\n\n<documents>\n<document path=\"docs/article.md\">\n# Article\n\nEvidence.\n</document>\n</documents>"
        );
        let abs = cwd.join("bom.txt").display().to_string();
        let docs = load(&cwd, &[abs, "docs/article.md".into()]).unwrap();
        assert_eq!(
            docs[0],
            InputDocument {
                path: "bom.txt".into(),
                content: "hi".into()
            }
        );
        assert!(append_documents("T", &docs).contains("\n\n<document path=\"docs/article.md\">"));
        assert_eq!(append_documents("T", &[]), "T");
    }

    #[test]
    fn refusals_have_the_exact_texts() {
        let (d, cwd) = setup();
        for i in 0..9 {
            std::fs::write(cwd.join(format!("f{i}.txt")), "x").unwrap();
        }
        let nine: Vec<String> = (0..9).map(|i| format!("f{i}.txt")).collect();
        assert_eq!(
            load(&cwd, &nine).unwrap_err(),
            "Agent input_files accepts at most 8 files"
        );
        assert_eq!(load(&cwd, &nine[..8]).unwrap().len(), 8);

        std::fs::write(cwd.join("big1.txt"), vec![b'a'; 300 * 1024]).unwrap();
        std::fs::write(cwd.join("big2.txt"), vec![b'b'; 213 * 1024]).unwrap();
        assert_eq!(
            load(&cwd, &s(&["big1.txt", "big2.txt"])).unwrap_err(),
            "Agent input_files exceeds the 524288-byte total limit"
        );
        std::fs::write(cwd.join("big2.txt"), vec![b'b'; 212 * 1024]).unwrap();
        assert!(load(&cwd, &s(&["big1.txt", "big2.txt"])).is_ok());

        std::fs::write(cwd.join("bad.txt"), [0xC3, 0x28]).unwrap();
        assert_eq!(
            load(&cwd, &s(&["bad.txt"])).unwrap_err(),
            "Agent input file is not valid UTF-8 text: bad.txt"
        );

        std::fs::write(d.path().join("secret.txt"), "secret").unwrap();
        assert_eq!(
            load(&cwd, &s(&["../secret.txt"])).unwrap_err(),
            "Agent input file is outside the session cwd: ../secret.txt"
        );
        let abs = d.path().join("secret.txt").display().to_string();
        assert_eq!(
            load(&cwd, std::slice::from_ref(&abs)).unwrap_err(),
            format!("Agent input file is outside the session cwd: {abs}")
        );
        std::os::unix::fs::symlink(d.path().join("secret.txt"), cwd.join("link.txt")).unwrap();
        assert_eq!(
            load(&cwd, &s(&["link.txt"])).unwrap_err(),
            "Agent input file is outside the session cwd: link.txt"
        );
        assert_eq!(
            load(&cwd, &s(&["missing.txt"])).unwrap_err(),
            "Agent input file does not exist: missing.txt"
        );
        assert_eq!(
            load(&cwd, &s(&["docs"])).unwrap_err(),
            "Agent input path is not a file: docs"
        );
        assert_eq!(
            load(&cwd, &s(&["  "])).unwrap_err(),
            "Agent input_files paths must not be empty"
        );
        // A FIFO is refused without blocking.
        let fifo = cwd.join("pipe");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert_eq!(
            load(&cwd, &s(&["pipe"])).unwrap_err(),
            "Agent input path is not a file: pipe"
        );
    }
}
