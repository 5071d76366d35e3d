//! The trust matrix: every cell recorded from the real pi 1.6.0 by
//! `tests/oracle/trust-matrix.mjs` (`tests/fixtures/trust/matrix.json`) is
//! rebuilt in a temp dir and decided by our `decide_with`; the decision,
//! whether the hook was consulted, trust.json afterwards (byte for byte) and
//! the error for a corrupt store must all match what pi did.
//!
//! The 54 matrix cells are {no protected resources, protected} × {-a, -na,
//! neither} × {trust.json: none, cwd true, ancestor false} ×
//! {defaultProjectTrust ask, always, never}, non-interactive (`pi -p`); the
//! extra cells cover hooks, which paths are protected, lookup details and
//! corrupt stores. Also here: concurrent writers and the corrupt-store
//! guarantee, which need no oracle.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pi_lib::trust::{decide_with, CliTrust, DecideInput, TrustError, TrustStore, TrustUpdate};
use serde_json::Value;

const CWD_REL: &str = "work/parent/proj";

fn fixture() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/trust/matrix.json");
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// What our implementation did in one cell, in the fixture's terms.
#[derive(Debug, PartialEq)]
struct Observed {
    trusted: Option<bool>,
    hook_called: bool,
    store_after: Option<String>,
    failed: bool,
    error: Option<String>,
}

fn run_cell(cell: &Value) -> Observed {
    let t = tempfile::tempdir().expect("tempdir");
    let root = fs::canonicalize(t.path()).expect("canonicalize");
    let s = &cell["setup"];
    let agent = root.join("agent");
    let cwd = root.join(CWD_REL);
    fs::create_dir_all(agent.join("extensions")).unwrap();
    fs::create_dir_all(&cwd).unwrap();
    fs::create_dir_all(root.join("home")).unwrap();
    for d in s["dirs"].as_array().into_iter().flatten() {
        fs::create_dir_all(root.join(d.as_str().unwrap())).unwrap();
    }
    #[cfg(unix)]
    for (link, target) in s["symlinks"].as_object().into_iter().flatten() {
        std::os::unix::fs::symlink(root.join(target.as_str().unwrap()), root.join(link)).unwrap();
    }
    for (f, text) in s["files"].as_object().into_iter().flatten() {
        let p = root.join(f);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text.as_str().unwrap()).unwrap();
    }
    if s["projectSettings"].is_object() {
        fs::create_dir_all(cwd.join(".pi")).unwrap();
        fs::write(
            cwd.join(".pi/settings.json"),
            s["projectSettings"].to_string(),
        )
        .unwrap();
    }
    let mut global = serde_json::json!({"defaultProvider": "mock", "defaultModel": "mock-model"});
    for (k, v) in s["globalSettings"].as_object().into_iter().flatten() {
        global[k] = v.clone();
    }
    fs::write(agent.join("settings.json"), global.to_string()).unwrap();
    let store_path = agent.join("trust.json");
    let root_s = root.display().to_string();
    if let Some(text) = s["storeText"].as_str() {
        fs::write(&store_path, text.replace("$ROOT", &root_s)).unwrap();
    }
    let cli = match s["cli"].as_str() {
        Some("approve") => CliTrust::Approve,
        Some("no_approve") => CliTrust::NoApprove,
        _ => CliTrust::Unset,
    };
    let mut hook_called = false;
    let hook_answer = match s["hook"]["trusted"].as_str() {
        Some("yes") => Some((true, s["hook"]["remember"] == true)),
        Some("no") => Some((false, s["hook"]["remember"] == true)),
        _ => None,
    };
    let mut hook = |p: &Path| {
        assert_eq!(p, cwd.as_path(), "the hook gets the canonical cwd");
        hook_called = true;
        hook_answer
    };
    let home = root.join(s["home"].as_str().unwrap_or("home"));
    let result = decide_with(DecideInput {
        cwd: &cwd,
        agent_dir: &agent,
        home: &home,
        cli,
        // the oracle's probe extension always listens
        hook: Some(&mut hook),
        interactive: false,
        prompter: None,
    });
    let store_after = fs::read(&store_path)
        .ok()
        .map(|b| String::from_utf8_lossy(&b).replace(&root_s, "$ROOT"));
    assert!(
        !store_path.with_extension("json.lock").exists(),
        "lock left behind"
    );
    match result {
        Ok(o) => Observed {
            trusted: Some(o.trusted),
            hook_called,
            store_after,
            failed: false,
            error: None,
        },
        Err(e) => Observed {
            trusted: None,
            hook_called,
            store_after,
            failed: true,
            error: Some(e.to_string().replace(&root_s, "$ROOT")),
        },
    }
}

/// Compares one cell; returns the differences.
fn check(cell: &Value) -> Vec<String> {
    let name = cell["name"].as_str().unwrap_or("?");
    let want = &cell["expect"];
    let got = run_cell(cell);
    let mut diffs = Vec::new();
    let failed = want["exitCode"] != 0;
    if failed != got.failed {
        diffs.push(format!(
            "{name}: pi exit {} but we {}",
            want["exitCode"],
            if got.failed { "failed" } else { "succeeded" }
        ));
    }
    if !failed && want["trusted"].as_bool() != got.trusted {
        diffs.push(format!(
            "{name}: pi trusted={} we {:?}",
            want["trusted"], got.trusted
        ));
    }
    if want["hookCalled"].as_bool() != Some(got.hook_called) {
        diffs.push(format!(
            "{name}: pi hookCalled={} we {}",
            want["hookCalled"], got.hook_called
        ));
    }
    if want["storeAfter"].as_str().map(str::to_string) != got.store_after {
        diffs.push(format!(
            "{name}: trust.json after: pi {:?} we {:?}",
            want["storeAfter"], got.store_after
        ));
    }
    if let (Some(pi_err), Some(our_err)) = (want["error"].as_str(), got.error.as_deref()) {
        let pi_err = pi_err.trim_start_matches("Error: ");
        // JSON.parse and serde word syntax errors differently; the part
        // naming the file (and for shape errors, all of it) must match.
        let same = if pi_err.starts_with("Failed to read trust store ") {
            let head = |s: &str| s.split(".json: ").next().map(str::to_string);
            head(pi_err) == head(our_err)
        } else {
            pi_err == our_err
        };
        if !same {
            diffs.push(format!("{name}: error: pi {pi_err:?} we {our_err:?}"));
        }
    }
    diffs
}

#[test]
fn matrix_matches_pi_1_6_0() {
    let fx = fixture();
    assert_eq!(fx["pi"], "1.6.0");
    let cells = fx["cells"].as_array().expect("cells");
    // the full product of the four axes is there
    let mut axes = BTreeMap::new();
    for c in cells.iter().filter(|c| c["axes"].is_object()) {
        *axes.entry(c["axes"].to_string()).or_insert(0) += 1;
    }
    assert_eq!(axes.len(), 2 * 3 * 3 * 3, "matrix cells");
    assert!(axes.values().all(|&n| n == 1));

    let mut diffs = Vec::new();
    let mut matched = 0;
    for cell in cells {
        let d = check(cell);
        if d.is_empty() {
            matched += 1;
        }
        diffs.extend(d);
    }
    eprintln!(
        "trust matrix: {matched}/{} cells match pi 1.6.0",
        cells.len()
    );
    assert!(
        diffs.is_empty(),
        "differences from pi:\n{}",
        diffs.join("\n")
    );
}

#[test]
fn matrix_axes_expected_values() {
    // A readable restatement of the recorded non-interactive rule, so a
    // regenerated fixture that changed meaning is noticed.
    let fx = fixture();
    for c in fx["cells"].as_array().into_iter().flatten() {
        let a = &c["axes"];
        if !a.is_object() {
            continue;
        }
        let want = match (
            a["cli"].as_str(),
            a["protected"].as_bool(),
            a["store"].as_str(),
        ) {
            (Some("approve"), ..) => true,
            (Some("no_approve"), ..) => false,
            (_, _, Some("cwd_true")) => true,
            (_, _, Some("ancestor_false")) => false,
            (_, Some(false), _) => true,
            _ => a["default"] == "always",
        };
        assert_eq!(
            c["expect"]["trusted"].as_bool(),
            Some(want),
            "{}",
            c["name"]
        );
        // nothing is ever saved without a hook or a prompt
        assert_eq!(
            c["expect"]["storeAfter"],
            match c["setup"]["storeText"].as_str() {
                Some(t) => Value::String(t.to_string()),
                None => Value::Null,
            },
            "{}",
            c["name"]
        );
    }
}

#[test]
fn corrupt_store_is_an_error_and_left_byte_for_byte() {
    let t = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(t.path()).unwrap();
    let agent = root.join("agent");
    fs::create_dir_all(&agent).unwrap();
    let cwd = root.join("p");
    fs::create_dir_all(cwd.join(".pi/extensions")).unwrap();
    let store = TrustStore::in_agent_dir(&agent);
    for bad in [
        &b"\xef\xbb\xbf{\"/a\": tru"[..],
        b"{\"/a\": true,}",
        b"{\"/a\": 0}",
        b"\"x\"",
        b"\xff\xfe{}",
    ] {
        fs::write(store.path(), bad).unwrap();
        let err = decide_with(DecideInput {
            cwd: &cwd,
            agent_dir: &agent,
            home: &root,
            cli: CliTrust::Unset,
            hook: Some(&mut |_: &Path| Some((true, true))),
            interactive: false,
            prompter: None,
        })
        .unwrap_err();
        assert!(err.is_corrupt_store(), "{err}");
        assert!(
            err.to_string()
                .contains(&store.path().display().to_string()),
            "{err}"
        );
        assert!(matches!(
            err,
            TrustError::Read { .. } | TrustError::Invalid { .. }
        ));
        let err = store.set(&cwd, Some(false)).unwrap_err();
        assert!(err.is_corrupt_store(), "{err}");
        assert_eq!(fs::read(store.path()).unwrap(), bad);
        assert!(!store.lock_path().exists());
    }
}

#[test]
fn concurrent_writers_lose_nothing() {
    let t = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(t.path()).unwrap();
    let store = Arc::new(TrustStore::in_agent_dir(&root.join("agent")));
    const THREADS: usize = 8;
    const EACH: usize = 25;
    let handles: Vec<_> = (0..THREADS)
        .map(|th| {
            let store = Arc::clone(&store);
            let root = root.clone();
            std::thread::spawn(move || {
                for i in 0..EACH {
                    let p: PathBuf = root.join(format!("t{th}/d{i}"));
                    store
                        .set_many(&[TrustUpdate::set(&p, i % 2 == 0)])
                        .expect("set");
                    // a reader in between never sees a torn file
                    store.load().expect("load");
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("thread");
    }
    let entries = store.load().unwrap();
    assert_eq!(entries.len(), THREADS * EACH);
    for th in 0..THREADS {
        for i in 0..EACH {
            assert_eq!(
                entries.exact(&root.join(format!("t{th}/d{i}"))),
                Some(i % 2 == 0)
            );
        }
    }
    // and the file is in pi's canonical form
    let text = fs::read_to_string(store.path()).unwrap();
    assert_eq!(text, entries.to_file_text());
    assert!(!store.lock_path().exists());
}
