//! Link settings for the release binaries, chosen for their memory.
//!
//! A short `pi-run` spends most of its resident memory on its own code pages,
//! not on its heap: the kernel maps code in windows of many pages around each
//! page a run touches, so functions scattered over the whole `.text` make most
//! of it resident. Release builds on x86-64 Linux (where rustc links with LLD)
//! therefore hand the linker `bins/link-order.txt`, the functions typical runs
//! execute, made by `bench/link-order.py`, so they sit together at the start
//! of `.text`. Where the C library understands packed relative relocations
//! (glibc 2.36 and later), the binaries use them, so the dynamic loader reads
//! kilobytes of relocations instead of a megabyte. A build that names its
//! own linker gets no ordering file (a linker that does not read one would
//! fail the link); `PI_LINK_ORDER=0` turns both off, for binaries meant for
//! an older glibc.

use std::env;
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=bins/link-order.txt");
    println!("cargo:rerun-if-env-changed=PI_LINK_ORDER");
    let var = |name: &str| env::var(name).unwrap_or_default();
    if var("PROFILE") != "release"
        || var("PI_LINK_ORDER") == "0"
        || var("CARGO_CFG_TARGET_OS") != "linux"
        || var("CARGO_CFG_TARGET_ARCH") != "x86_64"
        || var("CARGO_CFG_TARGET_ENV") != "gnu"
        || var("HOST") != var("TARGET")
    {
        return;
    }
    let order = Path::new(&var("CARGO_MANIFEST_DIR")).join("bins/link-order.txt");
    if order.is_file() && links_with_rustc_lld() {
        // Named relative to the package's root, where cargo runs rustc and
        // rustc the linker: an absolute path would outlive the checkout. A
        // target directory shared by two checkouts (the memory guard's cache
        // is one) keeps this script's output from whichever built first,
        // and a moved or deleted first checkout would fail every link.
        println!("cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file=bins/link-order.txt");
        println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    }
    if glibc_at_least(2, 36) {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

/// Whether rustc links these binaries with its own LLD, which reads a
/// symbol ordering file: the default on x86-64 Linux since Rust 1.90, unless
/// the build names another linker or linker flavour.
fn links_with_rustc_lld() -> bool {
    let flags = env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let custom = flags.split('\x1f').any(|f| {
        f.contains("linker") || f.contains("fuse-ld") || f.contains("link-self-contained")
    }) || env::var_os("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER").is_some();
    if custom {
        return false;
    }
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let Ok(out) = std::process::Command::new(rustc).arg("--version").output() else {
        return false;
    };
    // "rustc 1.95.0 (59807616e 2026-04-14)"
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text.split_whitespace().nth(1).unwrap_or("");
    let mut parts = version
        .split(['.', '-'])
        .map(|p| p.parse::<u32>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0)) >= (1, 90)
}

/// Whether the C library this build runs on (the one the binaries will run
/// on, host and target being the same) is glibc `major.minor` or later.
fn glibc_at_least(major: u32, minor: u32) -> bool {
    let Ok(out) = std::process::Command::new("ldd").arg("--version").output() else {
        return false;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let Some(version) = text
        .lines()
        .next()
        .and_then(|line| line.split_whitespace().last())
    else {
        return false;
    };
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let found = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    found >= (major, minor)
}
