//! The Node host's own tests (tests/ext-node/*.test.mjs, Node's test
//! runner): the host played against a driver, and against pi 1.6.0 with
//! real npm extensions. Run here so `cargo test` covers them; they need the
//! oracle's Node 22 (and print `SKIP` for parts whose npm packages are not
//! installed, failing instead under `CI=true`).

use std::process::Command;

use crate::common::*;

#[test]
fn node_host_tests_pass() {
    let Some(o) = Oracle::find("node_host_tests_pass") else {
        return;
    };
    let dir = repo().join("tests/ext-node");
    let mut tests: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".test.mjs"))
        .collect();
    tests.sort();
    assert!(!tests.is_empty(), "no tests in {}", dir.display());
    // The host's stripped-TypeScript cache goes to a scratch dir, not ~/.cache.
    let scratch = tempfile::tempdir().unwrap();
    let out = Command::new(&o.node22)
        .arg("--test")
        .args(&tests)
        .env("PI_ORACLE_DIR", &o.root)
        .env("PI_TS_CACHE", scratch.path().join("ts-cache"))
        .current_dir(repo())
        .output()
        .unwrap();
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(out.status.success(), "node --test failed:\n{text}");
    assert!(text.contains("# fail 0"), "{text}");
}
