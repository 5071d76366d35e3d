//! Embeds the Node extension host (`src/extensions/node-host/`, JS files)
//! as `$OUT_DIR/node_host_files.rs`: `&[(relative_path, bytes)]`. A missing
//! folder gives an empty list (TS/JS extensions then get a diagnostic).

use std::path::{Path, PathBuf};

fn walk(dir: &Path, root: &Path, out: &mut Vec<(String, PathBuf)>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        println!("cargo:rerun-if-changed={}", p.display());
        if p.is_dir() {
            walk(&p, root, out);
        } else if p.is_file() {
            if let Ok(rel) = p.strip_prefix(root) {
                out.push((rel.to_string_lossy().replace('\\', "/"), p.clone()));
            }
        }
    }
}

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let root = manifest.join("src/extensions/node-host");
    // A path that does not exist would rebuild every time: watch the
    // parent until the folder appears.
    if root.is_dir() {
        println!("cargo:rerun-if-changed={}", root.display());
    } else {
        println!(
            "cargo:rerun-if-changed={}",
            manifest.join("src/extensions").display()
        );
    }
    let mut files = Vec::new();
    walk(&root, &root, &mut files);
    let mut code = String::from("&[\n");
    for (rel, abs) in files {
        code.push_str(&format!(
            "    ({rel:?}, include_bytes!({:?}) as &[u8]),\n",
            abs.display().to_string()
        ));
    }
    code.push(']');
    let out =
        PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default()).join("node_host_files.rs");
    if let Err(e) = std::fs::write(&out, code) {
        panic!("cannot write {}: {e}", out.display());
    }
}
