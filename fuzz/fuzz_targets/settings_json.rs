#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

#[path = "../checks.rs"]
mod checks;

/// One scratch folder per fuzzing process (settings are read from files).
fn scratch() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        // tmpfs when there is one: rewriting a file on ext4 flushes it.
        let shm = std::path::Path::new("/dev/shm");
        let base = if shm.is_dir() {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        base.join(format!("pi-fuzz-settings-{}", std::process::id()))
    })
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::settings_json(data, scratch()));
