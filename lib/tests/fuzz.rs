//! Bounded property tests over every parser that reads outside input (the
//! stable-toolchain half of the fuzzing; `fuzz/` holds the libFuzzer half).
//! The properties themselves are in `fuzz/checks.rs`, shared with the
//! libFuzzer targets. Each target here
//!
//! 1. replays its seed corpus (`fuzz/corpus/<target>/`), the crashes found
//!    so far (`fuzz/regressions/<target>/`) and real files of that format
//!    from the repo (pi's session fixtures; the golden SSE streams when
//!    `shared/` is beside the repo), then
//! 2. runs proptest on structure-aware generators (pi-shaped session
//!    lines, SSE streams, JSON documents, templates, YAML, JSONC) and on
//!    raw bytes.
//!
//! Every input must finish within a generous time limit and allocate at
//! most a small multiple of its size at its peak (a counting allocator
//! tracks the bytes live on the test's thread). `PI_FUZZ_CASES` sets the
//! number of generated cases per property (default 64: well under a
//! minute for the whole file in a debug build); proptest's failure seeds
//! are kept in `fuzz/regressions/proptest/`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};
use serde_json::{json, Map, Value};

#[path = "../../fuzz/checks.rs"]
mod checks;

// ----------------------------------------------------------- the bounds

/// Bytes live on this thread, and the peak since the last reset.
struct Counting;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn track(delta: isize) {
    let _ = LIVE.try_with(|l| {
        let v = l.get() + delta;
        l.set(v);
        let _ = PEAK.try_with(|p| {
            if v > p.get() {
                p.set(v)
            }
        });
    });
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            track(l.size() as isize);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        track(-(l.size() as isize));
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() {
            track(new as isize - l.size() as isize);
        }
        q
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// A time limit no linear parser gets near on these input sizes, even
/// unoptimised on a loaded machine; a quadratic one does.
const TIME_LIMIT: Duration = Duration::from_secs(10);

/// Runs `f` on `data` and checks the time and peak-memory bounds: at most
/// `factor` × the input plus 4 MiB of fixed overhead (the built-in model
/// list, regex compilation, HTML templates).
fn bounded(target: &str, factor: usize, data: &[u8], f: impl FnOnce(&[u8])) {
    let base = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(base));
    let t0 = Instant::now();
    f(data);
    let took = t0.elapsed();
    let peak = (PEAK.with(Cell::get) - base).max(0) as usize;
    if data.len() > 100_000 {
        eprintln!(
            "{target}: {} bytes in {took:?}, peak {peak} bytes",
            data.len()
        );
    }
    let limit = factor * data.len() + (4 << 20);
    assert!(
        took < TIME_LIMIT,
        "{target}: {} input bytes took {took:?}",
        data.len()
    );
    assert!(
        peak <= limit,
        "{target}: {} input bytes peaked at {peak} bytes (limit {limit})",
        data.len()
    );
}

fn cases() -> u32 {
    std::env::var("PI_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

fn config(name: &str) -> Config {
    let file = format!(
        "{}/../fuzz/regressions/proptest/{name}.txt",
        env!("CARGO_MANIFEST_DIR")
    );
    Config {
        cases: cases(),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(Box::leak(
            file.into_boxed_str(),
        )))),
        max_shrink_iters: 2048,
        ..Config::default()
    }
}

// ------------------------------------------------------ replayed files

fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut v: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
    v.sort();
    for p in v {
        if p.is_dir() {
            files_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// The corpus and regression files of `target`, plus `extra` folders.
fn replay(target: &str, factor: usize, extra: &[PathBuf], f: impl Fn(&[u8])) -> usize {
    let mut files = Vec::new();
    for d in ["corpus", "regressions"] {
        files_under(&repo().join("fuzz").join(d).join(target), &mut files);
    }
    for d in extra {
        files_under(d, &mut files);
    }
    for p in &files {
        let data = std::fs::read(p).unwrap();
        let name = format!("{target} {}", p.display());
        bounded(&name, factor, &data, &f);
    }
    files.len()
}

/// `shared/golden-sse` when the shared folder lies beside the checkout.
fn golden_sse() -> Vec<PathBuf> {
    [repo().join("../shared"), repo().join("../../shared")]
        .into_iter()
        .map(|s| s.join("golden-sse"))
        .filter(|p| p.is_dir())
        .take(1)
        .collect()
}

// ---------------------------------------------------------- generators

/// Text with the characters parsers trip on: quotes, backslashes, line
/// ends, colons, dollars, braces, non-ASCII, a BOM, an astral character.
fn tricky_text(max: usize) -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        "[a-z0-9 ]{1,6}",
        Just("\"".to_string()),
        Just("'".to_string()),
        Just("\\".to_string()),
        Just("\n".to_string()),
        Just("\r\n".to_string()),
        Just("\r".to_string()),
        Just(":".to_string()),
        Just(": ".to_string()),
        Just("#".to_string()),
        Just("$".to_string()),
        Just("{".to_string()),
        Just("}".to_string()),
        Just("[".to_string()),
        Just("]".to_string()),
        Just(",".to_string()),
        Just("-".to_string()),
        Just("é".to_string()),
        Just("\u{feff}".to_string()),
        Just("😀".to_string()),
        Just("\u{0}".to_string()),
        Just("\t".to_string()),
    ];
    proptest::collection::vec(piece, 0..max).prop_map(|v| v.concat())
}

/// Any JSON value, a few levels deep.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        (-1e6f64..1e6).prop_map(|f| json!(f)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        tricky_text(8).prop_map(Value::String),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::vec(("[a-zA-Z_\"\\\\ ]{0,6}", inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// Ids from a small pool, so duplicates, dangling parents and cycles occur.
fn id() -> impl Strategy<Value = String> {
    prop_oneof!["[a-f0-9]{8}", "(a|b|c|d)".prop_map(|s| s.repeat(8))]
}

fn maybe_parent() -> impl Strategy<Value = Value> {
    prop_oneof![Just(Value::Null), id().prop_map(Value::String)]
}

/// A content block as pi writes them (and a few it does not).
fn block() -> impl Strategy<Value = Value> {
    prop_oneof![
        tricky_text(6).prop_map(|t| json!({"type": "text", "text": t})),
        tricky_text(4)
            .prop_map(|t| json!({"type": "thinking", "thinking": t, "thinkingSignature": "s"})),
        (id(), json_value()).prop_map(
            |(i, a)| json!({"type": "toolCall", "id": i, "name": "bash", "arguments": a})
        ),
        Just(json!({"type": "image", "data": "AAAA", "mimeType": "image/png"})),
        json_value(),
    ]
}

fn usage() -> impl Strategy<Value = Value> {
    (0u64..100_000, 0u64..5000, 0.0f64..0.01).prop_map(|(i, o, c)| {
        json!({"input": i, "output": o, "cacheRead": 0, "cacheWrite": 0, "totalTokens": i + o,
               "cost": {"input": c, "output": c * 3.0, "cacheRead": 0, "cacheWrite": 0, "total": c * 4.0}})
    })
}

/// A message in pi's key order (per role), or one of a future role.
fn message() -> impl Strategy<Value = Value> {
    let content = prop_oneof![
        tricky_text(8).prop_map(Value::String),
        proptest::collection::vec(block(), 0..4).prop_map(Value::Array),
        json_value(),
    ]
    .boxed();
    let blocks = proptest::collection::vec(block(), 0..4)
        .prop_map(Value::Array)
        .boxed();
    let ts = 0i64..2_000_000_000_000;
    prop_oneof![
        (content.clone(), ts.clone())
            .prop_map(|(c, t)| json!({"role": "user", "content": c, "timestamp": t})),
        (blocks.clone(), usage(), ts.clone()).prop_map(|(c, u, t)| json!({
            "role": "assistant", "content": c, "api": "openai-completions", "provider": "mock",
            "model": "m", "usage": u, "stopReason": "stop", "timestamp": t})),
        (blocks, any::<bool>(), ts.clone()).prop_map(|(c, e, t)| json!({
            "role": "toolResult", "toolCallId": "c1", "toolName": "bash", "content": c,
            "isError": e, "timestamp": t})),
        (content.clone(), ts.clone()).prop_map(|(c, t)| json!({
            "role": "system", "content": c, "sections": {"preamble": "p"}, "timestamp": t})),
        (content.clone(), ts.clone()).prop_map(|(c, t)| json!({
            "role": "custom", "customType": "ext", "content": c, "display": true, "timestamp": t})),
        (tricky_text(4), ts.clone()).prop_map(|(o, t)| json!({
            "role": "bashExecution", "command": "ls", "output": o, "exitCode": 0,
            "cancelled": false, "truncated": false, "timestamp": t})),
        (content, json_value(), ts).prop_map(|(c, x, t)| json!({
            "role": "oracle", "content": c, "timestamp": t, "future": x})),
        json_value(),
    ]
}

/// One session entry in pi's own key order, or a damaged variant.
fn entry() -> impl Strategy<Value = Value> {
    let ts = Just("2026-01-01T00:00:00.000Z".to_string());
    prop_oneof![
        (id(), maybe_parent(), ts.clone(), message()).prop_map(|(i, p, t, m)| {
            json!({"type": "message", "id": i, "parentId": p, "timestamp": t, "message": m})
        }),
        (id(), maybe_parent(), ts.clone(), "(off|low|high|x)").prop_map(|(i, p, t, l)| {
            json!({"type": "thinking_level_change", "id": i, "parentId": p, "timestamp": t, "thinkingLevel": l})
        }),
        (id(), maybe_parent(), ts.clone()).prop_map(|(i, p, t)| {
            json!({"type": "model_change", "id": i, "parentId": p, "timestamp": t, "provider": "mock", "modelId": "m"})
        }),
        (id(), maybe_parent(), ts.clone(), id(), tricky_text(4)).prop_map(|(i, p, t, target, l)| {
            json!({"type": "label", "id": i, "parentId": p, "timestamp": t, "targetId": target, "label": l})
        }),
        (id(), maybe_parent(), ts.clone(), tricky_text(4)).prop_map(|(i, p, t, n)| {
            json!({"type": "session_info", "id": i, "parentId": p, "timestamp": t, "name": n})
        }),
        (id(), maybe_parent(), ts.clone(), id(), usage()).prop_map(|(i, p, t, k, u)| {
            json!({"type": "compaction", "id": i, "parentId": p, "timestamp": t, "summary": "s",
                   "firstKeptEntryId": k, "tokensBefore": 10, "details": {"readFiles": [], "modifiedFiles": []},
                   "usage": u, "fromHook": false})
        }),
        (id(), maybe_parent(), ts.clone(), json_value()).prop_map(|(i, p, t, d)| {
            json!({"type": "custom", "customType": "ext", "data": d, "id": i, "parentId": p, "timestamp": t})
        }),
        (id(), maybe_parent(), ts.clone(), id()).prop_map(|(i, p, t, f)| {
            json!({"type": "branch_summary", "id": i, "parentId": p, "timestamp": t, "fromId": f, "summary": "s"})
        }),
        (id(), maybe_parent(), ts, id(), json_value()).prop_map(|(i, p, t, target, r)| {
            json!({"type": "context_edit", "id": i, "parentId": p, "timestamp": t, "targetId": target, "replacement": r})
        }),
        json_value(),
    ]
}

/// How one line is damaged (most are left alone).
#[derive(Debug, Clone)]
enum Damage {
    None,
    Truncate(usize),
    Garbage(String),
    Crlf,
    Blank,
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        12 => Just(Damage::None),
        1 => (0usize..200).prop_map(Damage::Truncate),
        1 => tricky_text(6).prop_map(Damage::Garbage),
        1 => Just(Damage::Crlf),
        1 => Just(Damage::Blank),
    ]
}

/// A session file: a header (versions 1–4) and pi-shaped entries written
/// canonically, some lines damaged.
fn session_file() -> impl Strategy<Value = Vec<u8>> {
    (
        prop_oneof![
            Just(json!(3)),
            Just(json!(2)),
            Just(json!(1)),
            Just(Value::Null),
            Just(json!(4)),
            Just(json!("3"))
        ],
        proptest::collection::vec((entry(), damage()), 0..12),
        any::<bool>(),
    )
        .prop_map(|(version, entries, final_newline)| {
            let mut h = json!({"type": "session", "version": version, "id": "s1",
                               "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/p"});
            if version.is_null() {
                h.as_object_mut().unwrap().shift_remove("version");
            }
            let mut out = serde_json::to_string(&h).unwrap().into_bytes();
            for (e, d) in entries {
                out.push(b'\n');
                let line = serde_json::to_string(&e).unwrap();
                match d {
                    Damage::None => out.extend_from_slice(line.as_bytes()),
                    Damage::Truncate(n) => {
                        out.extend_from_slice(&line.as_bytes()[..n.min(line.len())])
                    }
                    Damage::Garbage(g) => out.extend_from_slice(g.as_bytes()),
                    Damage::Crlf => {
                        out.extend_from_slice(line.as_bytes());
                        out.push(b'\r');
                    }
                    Damage::Blank => {}
                }
            }
            if final_newline {
                out.push(b'\n');
            }
            out
        })
}

fn line_end() -> impl Strategy<Value = &'static str> {
    prop_oneof![Just("\n"), Just("\r\n"), Just("\r")]
}

/// An SSE stream: fields, comments, blank lines and junk, with mixed line
/// ends; plus where to cut it into chunks.
fn sse_stream() -> impl Strategy<Value = (Vec<u8>, Vec<usize>)> {
    let line = prop_oneof![
        4 => tricky_text(6).prop_map(|t| format!("data: {t}")),
        1 => tricky_text(4).prop_map(|t| format!("data:{t}")),
        1 => Just("data".to_string()),
        1 => "[a-z_.]{0,8}".prop_map(|t| format!("event: {t}")),
        1 => tricky_text(4).prop_map(|t| format!(":{t}")),
        2 => Just(String::new()),
        1 => Just("id: 7".to_string()),
        1 => Just("retry: 10".to_string()),
        1 => tricky_text(4),
        1 => json_value().prop_map(|v| format!("data: {v}")),
    ];
    (
        proptest::collection::vec((line, line_end()), 0..24),
        proptest::collection::vec(any::<prop::sample::Index>(), 0..12),
    )
        .prop_map(|(lines, cuts)| {
            let mut s = String::new();
            for (l, e) in lines {
                s.push_str(&l);
                s.push_str(e);
            }
            let bytes = s.into_bytes();
            let mut cuts: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
            cuts.sort_unstable();
            (bytes, cuts)
        })
}

/// A template with every placeholder form, and an argument string.
fn template_input() -> impl Strategy<Value = (String, String)> {
    let piece = prop_oneof![
        tricky_text(3),
        Just("$@".to_string()),
        Just("$ARGUMENTS".to_string()),
        (0u32..12).prop_map(|n| format!("${n}")),
        (0u32..5, "[a-z ]{0,4}").prop_map(|(n, d)| format!("${{{n}:-{d}}}")),
        "[a-z]{0,4}".prop_map(|d| format!("${{@:-{d}}}")),
        (0u32..5).prop_map(|n| format!("${{@:{n}}}")),
        (0u32..5, 0u32..5).prop_map(|(a, b)| format!("${{@:{a}:{b}}}")),
        Just("${99999999999999999999999}".to_string()),
        Just("${@:99999999999999999999:99999999999999999999}".to_string()),
    ];
    (
        proptest::collection::vec(piece, 0..10).prop_map(|v| v.concat()),
        tricky_text(10),
    )
}

/// A YAML mapping of simple scalars, written in one of the quoting styles
/// the parser must read back exactly.
fn yaml_map() -> impl Strategy<Value = (Map<String, Value>, String)> {
    let value = prop_oneof![
        "[a-zA-Z][a-zA-Z0-9 ]{0,10}[a-zA-Z]".prop_map(|s| (Value::String(s.clone()), s)),
        any::<String>().prop_map(|s| {
            let mut q = String::from('"');
            for c in s.chars() {
                match c {
                    '"' => q.push_str("\\\""),
                    '\\' => q.push_str("\\\\"),
                    '\n' => q.push_str("\\n"),
                    '\t' => q.push_str("\\t"),
                    '\r' => q.push_str("\\r"),
                    c if (c as u32) < 0x20
                        || c == '\u{7f}'
                        || c == '\u{feff}'
                        || c == '\u{85}'
                        || c == '\u{2028}'
                        || c == '\u{2029}' =>
                    {
                        q.push_str(&format!("\\u{:04x}", c as u32))
                    }
                    c => q.push(c),
                }
            }
            q.push('"');
            (Value::String(s), q)
        }),
        "[a-zA-Z0-9 :#\"-]{0,12}".prop_map(|s| {
            let q = format!("'{}'", s.replace('\'', "''"));
            (Value::String(s), q)
        }),
        any::<bool>().prop_map(|b| (Value::Bool(b), b.to_string())),
        any::<i32>().prop_map(|n| (json!(n), n.to_string())),
    ];
    proptest::collection::vec(("[a-z][a-z0-9-]{0,10}", value), 0..8).prop_map(|kv| {
        let mut map = Map::new();
        let mut yaml = String::new();
        for (k, (v, text)) in kv {
            if map.contains_key(&k) {
                continue;
            }
            yaml.push_str(&format!("{k}: {text}\n"));
            map.insert(k, v);
        }
        (map, yaml)
    })
}

/// JSON text with `//` comments after values and trailing commas — the
/// models.json dialect — and the value it means.
fn jsonc() -> impl Strategy<Value = (Value, String)> {
    (json_value(), any::<u64>()).prop_map(|(v, seed)| {
        let pretty = serde_json::to_string_pretty(&v).unwrap();
        let mut x = seed | 1;
        let mut out = String::new();
        let lines: Vec<&str> = pretty.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            out.push_str(l);
            let next_closes = lines
                .get(i + 1)
                .map(|n| n.trim_start().starts_with([']', '}']))
                .unwrap_or(false);
            let opens = l.ends_with('[') || l.ends_with('{');
            if x % 3 == 0 && next_closes && !opens && !l.ends_with(',') {
                out.push(',');
            }
            if x % 5 == 0 {
                out.push_str(" // note, with \"quotes\" and // slashes");
            }
            out.push('\n');
        }
        (v, out)
    })
}

// -------------------------------------------------------------- targets

/// Peak-memory factors: a parsed value costs a few dozen bytes per input
/// byte at worst (`[[[[` is an array per byte), a session more (an entry,
/// its diagnostics and the exports built from it).
const JSON_FACTOR: usize = 64;
const SESSION_FACTOR: usize = 128;

#[test]
fn fuzz_sse() {
    let n = replay("sse", 16, &golden_sse(), checks::sse);
    assert!(n >= 3, "{n} replayed");
    proptest!(config("sse"), |((data, cuts) in sse_stream())| {
        bounded("sse", 16, &data, |d| {
            checks::sse(d);
            assert_eq!(checks::sse_chunked(d, &cuts), checks::sse_chunked(d, &[]));
        });
    });
    proptest!(config("sse-bytes"), |(data in proptest::collection::vec(any::<u8>(), 0..512))| {
        bounded("sse", 16, &data, checks::sse);
    });
}

#[test]
fn fuzz_partial_json() {
    let n = replay("partial_json", JSON_FACTOR, &[], checks::partial_json);
    assert!(n >= 3, "{n} replayed");
    proptest!(config("partial-json"), |(v in json_value(), pretty in any::<bool>())| {
        let text = if pretty {
            serde_json::to_string_pretty(&v).unwrap()
        } else {
            serde_json::to_string(&v).unwrap()
        };
        bounded("partial_json", JSON_FACTOR, text.as_bytes(), checks::partial_json);
    });
    proptest!(config("partial-json-text"), |(t in tricky_text(40))| {
        bounded("partial_json", JSON_FACTOR, t.as_bytes(), checks::partial_json);
    });
}

#[test]
fn fuzz_session() {
    let fixtures = [repo().join("tests/fixtures/pi-sessions/sessions")];
    let n = replay("session", SESSION_FACTOR, &[], checks::session);
    assert!(n >= 3, "{n} replayed");
    // pi's own files, and pi-shaped lines: byte for byte.
    let mut files = Vec::new();
    files_under(&fixtures[0], &mut files);
    assert!(files.len() >= 9);
    for p in files {
        let data = std::fs::read(&p).unwrap();
        bounded("session", SESSION_FACTOR, &data, checks::session_exact);
    }
    proptest!(config("session"), |(data in session_file())| {
        bounded("session", SESSION_FACTOR, &data, checks::session_exact);
    });
    proptest!(config("session-bytes"), |(data in proptest::collection::vec(any::<u8>(), 0..256))| {
        let mut d = br#"{"type":"session","version":3,"id":"x"}"#.to_vec();
        d.push(b'\n');
        d.extend(data);
        bounded("session", SESSION_FACTOR, &d, checks::session);
    });
}

#[test]
fn fuzz_template() {
    let n = replay("template", JSON_FACTOR, &[], checks::template);
    assert!(n >= 3, "{n} replayed");
    proptest!(config("template"), |((tpl, args) in template_input())| {
        let data = format!("{tpl}\0{args}");
        // Output may hold every argument once per placeholder.
        let factor = JSON_FACTOR * (1 + tpl.matches('$').count());
        bounded("template", factor, data.as_bytes(), checks::template);
    });
    proptest!(config("template-args"), |(args in proptest::collection::vec("[^\"\\\\]{0,8}", 0..6))| {
        checks::template_args_round_trip(&args);
    });
}

#[test]
fn fuzz_frontmatter() {
    let n = replay("frontmatter", JSON_FACTOR, &[], checks::frontmatter);
    assert!(n >= 3, "{n} replayed");
    proptest!(config("frontmatter"), |((map, yaml) in yaml_map(), body in tricky_text(6))| {
        let text = format!("---\n{yaml}---\n{body}");
        bounded("frontmatter", JSON_FACTOR, text.as_bytes(), checks::frontmatter);
        let parsed = pi_lib::resources::frontmatter::parse(&text)
            .unwrap_or_else(|e| panic!("{text:?}: {e}"));
        prop_assert_eq!(parsed.fields, map);
    });
    proptest!(config("frontmatter-text"), |(t in tricky_text(60))| {
        let text = format!("---\n{t}");
        bounded("frontmatter", JSON_FACTOR, text.as_bytes(), checks::frontmatter);
    });
}

#[test]
fn fuzz_models_json() {
    let n = replay("models_json", JSON_FACTOR, &[], checks::models_json);
    assert!(n >= 3, "{n} replayed");
    proptest!(config("models-json"), |((v, text) in jsonc())| {
        bounded("models_json", JSON_FACTOR, text.as_bytes(), checks::models_json);
        let path = Path::new("/fuzz/models.json");
        let got = pi_lib::model::models_json::parse(&text, path);
        match (&v, got) {
            (Value::Object(m), Ok(g)) => prop_assert_eq!(&g, m),
            (Value::Object(_), Err(e)) => panic!("{text}: {e}"),
            (_, r) => prop_assert!(r.is_err()),
        }
    });
    proptest!(config("models-json-text"), |(t in tricky_text(40))| {
        bounded("models_json", JSON_FACTOR, t.as_bytes(), checks::models_json);
    });
}

#[test]
fn fuzz_settings_json() {
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path().to_path_buf();
    let n = replay("settings_json", JSON_FACTOR, &[], |d| {
        checks::settings_json(d, &s)
    });
    assert!(n >= 3, "{n} replayed");
    proptest!(config("settings-json"), |(a in json_value(), b in json_value(), cut in any::<prop::sample::Index>())| {
        let (a, b) = (serde_json::to_string(&a).unwrap(), serde_json::to_string_pretty(&b).unwrap());
        let mut data = a.into_bytes();
        data.push(0);
        data.extend(b.as_bytes());
        // Sometimes cut the project file short.
        let keep = data.len() - cut.index(b.len() / 4 + 1);
        data.truncate(keep);
        bounded("settings_json", JSON_FACTOR, &data, |d| checks::settings_json(d, &s));
    });
}

// ------------------------------------------- hostile inputs, full size

// Inputs shaped to hit recursion and quadratic paths, larger than the
// generators make: each must stay within the time and memory bounds (and,
// for nesting, not overflow the stack of a 2 MiB test thread).

fn deep(open: &str, n: usize) -> String {
    open.repeat(n)
}

#[test]
fn hostile_partial_json() {
    // Lenient JSON: 100k open brackets, a 200 KB number, a 1 MB string.
    for t in [
        deep("[", 100_000),
        deep("{\"a\":", 100_000),
        format!("[{}", "9".repeat(200_000)),
        format!("{{\"a\":1e{}", "9".repeat(200_000)),
        format!("{{\"a\":\"{}", "x".repeat(1 << 20)),
    ] {
        bounded("partial_json hostile", JSON_FACTOR, t.as_bytes(), |d| {
            let s = std::str::from_utf8(d).unwrap();
            let _ = pi_lib::provider::partial_json::parse_streaming_json(s);
            let _ = pi_lib::provider::partial_json::parse_arguments(s);
        });
    }
}

#[test]
fn hostile_frontmatter() {
    // Frontmatter: deep flow nesting, deep indentation, a quoted scalar
    // over 50k lines, many keys.
    let indented: String = (0..3000)
        .map(|i| format!("{}k{i}:\n", " ".repeat(i)))
        .collect();
    let quoted: String = std::iter::once("a: \"x".to_string())
        .chain((0..50_000).map(|_| "  more".to_string()))
        .collect::<Vec<_>>()
        .join("\n");
    let keys: String = (0..50_000).map(|i| format!("k{i}: v\n")).collect();
    for yaml in [
        format!("a: {}", deep("[", 100_000)),
        format!("a: {}", deep("{b: ", 100_000)),
        indented,
        quoted,
        keys,
    ] {
        let text = format!("---\n{yaml}\n---\nbody");
        bounded("frontmatter hostile", JSON_FACTOR, text.as_bytes(), |d| {
            let _ = pi_lib::resources::frontmatter::parse(std::str::from_utf8(d).unwrap());
        });
    }
}

#[test]
fn hostile_sse() {
    // SSE: a 4 MB line fed 64 bytes at a time; 1M tiny events at once.
    let line = format!("data: {}\n\n", "x".repeat(4 << 20));
    bounded("sse hostile", 16, line.as_bytes(), |d| {
        let mut dec = pi_lib::provider::sse::SseDecoder::new();
        let mut n = 0;
        for c in d.chunks(64) {
            n += dec.push(c).len();
        }
        n += dec.finish().len();
        assert_eq!(n, 1);
    });
    let many = "data: x\n\n".repeat(1_000_000);
    bounded("sse hostile", 16, many.as_bytes(), |d| {
        assert_eq!(
            pi_lib::provider::sse::SseDecoder::new().push(d).len(),
            1_000_000
        );
    });
}

#[test]
fn hostile_template() {
    // Templates: many placeholders over long arguments; many quotes.
    let tpl = "$@".repeat(1000);
    let args = vec!["y".repeat(1000); 10];
    // The output is 10 MB by design: bound by twice that.
    let factor = 2 * 1000 * (10 * 1000 + 9) / tpl.len();
    bounded("template hostile", factor, tpl.as_bytes(), |d| {
        let out = pi_lib::prompt::expand::substitute_args(std::str::from_utf8(d).unwrap(), &args);
        assert_eq!(out.len(), 1000 * (10 * 1000 + 9));
    });
    let quotes = "\"\\\" ".repeat(100_000);
    bounded("template hostile", JSON_FACTOR, quotes.as_bytes(), |d| {
        let _ = pi_lib::prompt::expand::split_args(std::str::from_utf8(d).unwrap());
    });
}

#[test]
fn hostile_session() {
    // Sessions: 100k `{}` lines, and 20k chained entries.
    let mut empties = b"{\"type\":\"session\",\"version\":3,\"id\":\"x\"}\n".to_vec();
    empties.extend(b"{}\n".repeat(100_000));
    // Lines that are not entries are dropped (and reported, capped).
    bounded("session hostile", SESSION_FACTOR, &empties, |d| {
        let s = pi_lib::session::Session::parse(Path::new("/f.jsonl"), d).unwrap();
        assert_eq!(s.entries.len(), 0);
    });
    let mut chain = b"{\"type\":\"session\",\"version\":3,\"id\":\"x\"}\n".to_vec();
    // (An unoptimised build parses ~10k message lines a second.)
    const N: usize = 20_000;
    for i in 0..N {
        let p = if i == 0 {
            "null".to_string()
        } else {
            format!("\"e{}\"", i - 1)
        };
        chain.extend(format!(
            "{{\"type\":\"message\",\"id\":\"e{i}\",\"parentId\":{p},\"timestamp\":\"t\",\"message\":{{\"role\":\"user\",\"content\":\"m\",\"timestamp\":1}}}}\n"
        ).as_bytes());
    }
    bounded("session hostile", SESSION_FACTOR, &chain, |d| {
        let s = pi_lib::session::Session::parse(Path::new("/f.jsonl"), d).unwrap();
        assert_eq!(s.context(None).messages.len(), N);
        assert_eq!(s.branch().len(), N);
    });
}

#[test]
fn hostile_models_json() {
    // models.json / settings: deep nesting past serde_json's limit is an
    // error, not a crash.
    let nested = format!("{{\"providers\":{}", deep("[", 100_000));
    bounded("models_json hostile", JSON_FACTOR, nested.as_bytes(), |d| {
        let r = pi_lib::model::models_json::parse(
            std::str::from_utf8(d).unwrap(),
            Path::new("/m.json"),
        );
        assert!(r.is_err());
    });
}
