//! The properties every parser that reads outside input must keep, one
//! function per fuzz target. Each takes raw bytes (what a fuzzer produces),
//! runs the library's public entry points on them and panics when a
//! property breaks — so the same checks serve the libFuzzer targets in
//! `fuzz/fuzz_targets/` (run outside CI with `cargo fuzz`) and the bounded
//! property tests in `lib/tests/fuzz.rs` (run in CI on stable), which
//! include this file.
//!
//! Beyond "no panic": the SSE decoder gives the same events however the
//! stream is chunked and agrees with a plain reference decoder; a session
//! line that is already in the canonical form pi writes survives
//! parse → write byte for byte, every other one keeps all its data; lenient
//! JSON of a complete document equals serde_json's and every prefix of it
//! gives a value consistent with the whole; the template expander's
//! placeholders mean what pi documents; JSONC stripping never changes what
//! strict JSON means; settings and models.json errors are one line naming
//! the file. Time and memory bounds are enforced by the callers (libFuzzer's
//! `-timeout` / `-rss_limit_mb`, the property harness's allocator).

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use pi_lib::provider::partial_json::{parse_arguments, parse_streaming_json};
use pi_lib::provider::sse::{SseDecoder, SseEvent};
use serde_json::Value;

/// Input larger than this is cut (keeps one execution short for libFuzzer).
pub const MAX_INPUT: usize = 1 << 16;

fn text(data: &[u8]) -> String {
    String::from_utf8_lossy(&data[..data.len().min(MAX_INPUT)]).into_owned()
}

// ---------------------------------------------------------------- SSE

/// A plain, whole-input SSE decoder written from the WHATWG rules, to
/// compare the incremental one with.
fn sse_reference(data: &[u8]) -> Vec<SseEvent> {
    let mut lines: Vec<&[u8]> = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < data.len() {
        match data[i] {
            b'\n' => {
                lines.push(&data[start..i]);
                i += 1;
                start = i;
            }
            b'\r' => {
                lines.push(&data[start..i]);
                i += 1;
                if data.get(i) == Some(&b'\n') {
                    i += 1;
                }
                start = i;
            }
            _ => i += 1,
        }
    }
    let tail = &data[start..];
    let mut out = Vec::new();
    let (mut event, mut buf, mut has) = (String::new(), String::new(), false);
    let mut dispatch = |event: &mut String, buf: &mut String, has: &mut bool| {
        if *has {
            out.push(SseEvent {
                event: std::mem::take(event),
                data: std::mem::take(buf),
            });
        } else {
            event.clear();
        }
        *has = false;
    };
    let all = lines.into_iter().chain((!tail.is_empty()).then_some(tail));
    for raw in all {
        let line = String::from_utf8_lossy(raw);
        if line.is_empty() {
            dispatch(&mut event, &mut buf, &mut has);
            continue;
        }
        if line.starts_with(':') {
            continue;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (&*line, ""),
        };
        match field {
            "data" => {
                if has {
                    buf.push('\n');
                }
                buf.push_str(value);
                has = true;
            }
            "event" => event = value.to_string(),
            _ => {}
        }
    }
    dispatch(&mut event, &mut buf, &mut has);
    out
}

/// Decodes `data` fed in chunks that end at `cuts` (sorted offsets).
pub fn sse_chunked(data: &[u8], cuts: &[usize]) -> Vec<SseEvent> {
    let mut d = SseDecoder::new();
    let mut out = Vec::new();
    let mut prev = 0;
    for &c in cuts.iter().chain(std::iter::once(&data.len())) {
        let c = c.clamp(prev, data.len());
        out.extend(d.push(&data[prev..c]));
        prev = c;
    }
    out.extend(d.finish());
    let _ = (d.looks_foreign(), d.first_foreign_line());
    out
}

/// SSE: chunking never changes the events, and they equal the reference.
pub fn sse(data: &[u8]) {
    let data = &data[..data.len().min(MAX_INPUT)];
    let whole = sse_chunked(data, &[]);
    assert_eq!(
        whole,
        sse_reference(data),
        "incremental vs reference decoder"
    );
    // Every byte its own chunk (only on small inputs: it is slow).
    if data.len() <= 4096 {
        let every: Vec<usize> = (1..data.len()).collect();
        assert_eq!(sse_chunked(data, &every), whole, "one byte per chunk");
    }
    // Cut right after every CR (a CRLF split across chunks), and at
    // pseudo-random places derived from the input.
    let after_cr: Vec<usize> = (0..data.len())
        .filter(|&i| data[i] == b'\r')
        .map(|i| i + 1)
        .collect();
    assert_eq!(sse_chunked(data, &after_cr), whole, "cut after each CR");
    let mut x = data.len() as u64 ^ 0x9e37_79b9_7f4a_7c15;
    let mut cuts = Vec::new();
    let mut at = 0usize;
    while at < data.len() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        at += 1 + (x % 97) as usize;
        cuts.push(at);
    }
    assert_eq!(sse_chunked(data, &cuts), whole, "random chunks");
}

// ---------------------------------------------------------- partial JSON

/// Whether `part` (the lenient parse of a prefix) is consistent with
/// `full` (the document): what it holds is what the document holds, cut
/// short at the end only.
fn consistent(part: &Value, full: &Value) -> bool {
    match (part, full) {
        (Value::Object(p), Value::Object(f)) => {
            p.len() <= f.len()
                && p.iter()
                    .zip(f.iter())
                    .all(|((pk, pv), (fk, fv))| pk == fk && consistent(pv, fv))
        }
        (Value::Array(p), Value::Array(f)) => {
            p.len() <= f.len() && p.iter().zip(f).all(|(a, b)| consistent(a, b))
        }
        (Value::String(p), Value::String(f)) => f.starts_with(p.as_str()),
        // A number cut short is some other number (`12` of `123`, `1` of
        // `1e5`).
        (Value::Number(_), Value::Number(_)) => true,
        (a, b) => a == b,
    }
}

/// Any JSON value in which no object repeats a key (else a parse error).
struct NoDuplicateKeys;

impl<'de> serde::Deserialize<'de> for NoDuplicateKeys {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NoDuplicateKeys)
    }
}

impl<'de> serde::de::Visitor<'de> for NoDuplicateKeys {
    type Value = NoDuplicateKeys;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("JSON")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self, E> {
        Ok(self)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self, E> {
        Ok(self)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self, E> {
        Ok(self)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self, E> {
        Ok(self)
    }
    fn visit_str<E>(self, _: &str) -> Result<Self, E> {
        Ok(self)
    }
    fn visit_unit<E>(self) -> Result<Self, E> {
        Ok(self)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<Self, A::Error> {
        while a.next_element::<NoDuplicateKeys>()?.is_some() {}
        Ok(self)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<Self, A::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(k) = a.next_key::<String>()? {
            if !seen.insert(k) {
                return Err(serde::de::Error::custom("duplicate key"));
            }
            a.next_value::<NoDuplicateKeys>()?;
        }
        Ok(self)
    }
}

/// The last complete element of a partial object/array may itself be cut,
/// so only earlier ones must be equal: `consistent` checks key order and
/// prefixes, which is what matters for streamed tool arguments.
pub fn partial_json(data: &[u8]) {
    let t = text(data);
    let v = parse_streaming_json(&t);
    let args = parse_arguments(&t);
    assert!(args.is_object(), "arguments are always an object");
    let Ok(full) = serde_json::from_str::<Value>(&t) else {
        return;
    };
    // With a key given twice the document keeps the first place and the
    // last value, so its prefixes need not agree with it.
    let unique = serde_json::from_str::<NoDuplicateKeys>(&t).is_ok();
    assert_eq!(v, full, "a complete document parses as serde_json does");
    if full.is_object() {
        assert_eq!(args, full);
    }
    // Prefixes: at most ~64, evenly spread, plus the last few bytes.
    let n = t.len();
    let step = (n / 64).max(1);
    let mut ends: Vec<usize> = (0..n).step_by(step).collect();
    ends.extend(n.saturating_sub(8)..n);
    for end in ends {
        if !unique || !t.is_char_boundary(end) {
            continue;
        }
        let p = parse_streaming_json(&t[..end]);
        let empty_object = p.as_object().is_some_and(|m| m.is_empty());
        assert!(
            empty_object || consistent(&p, &full),
            "prefix {end} of {t:?} gave {p} (document {full})"
        );
    }
}

// -------------------------------------------------------------- sessions

/// A file name for parsed-in-memory sessions (only used in messages).
fn session_path() -> PathBuf {
    PathBuf::from("/fuzz/session.jsonl")
}

/// Whether `line` is already in canonical compact form (what pi's
/// `JSON.stringify` and serde_json both write).
fn canonical(line: &[u8]) -> Option<Value> {
    let v: Value = serde_json::from_slice(line).ok()?;
    (serde_json::to_vec(&v).ok()? == line).then_some(v)
}

/// Whether `after` (an entry as written back) keeps everything `before`
/// (the line as read) holds. Writing may add the fields pi always writes
/// when a line lacks them (a message without `usage` gets zero usage), but
/// never drops or changes one.
fn keeps(after: &Value, before: &Value) -> bool {
    match (after, before) {
        (Value::Object(a), Value::Object(b)) => b
            .iter()
            .all(|(k, bv)| a.get(k).is_some_and(|av| keeps(av, bv))),
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| keeps(x, y))
        }
        (a, b) => a == b,
    }
}

/// Session lines and files: parse never panics; everything built from a
/// session (context, tree, stats, exports, listing) never panics; writing
/// it back and reading again is a fixed point; an entry keeps all its data
/// ([`keeps`]).
pub fn session(data: &[u8]) {
    session_checks(data, false)
}

/// [`session`], plus: every compact line round trips byte for byte. Only
/// for lines as pi writes them (all fields present, in pi's key order, as
/// the fixtures and the pi-shaped generator make them): a line with an
/// unknown field in the middle is written with that field last, and a
/// line missing a field pi always writes gets it filled in.
pub fn session_exact(data: &[u8]) {
    session_checks(data, true)
}

fn session_checks(data: &[u8], exact: bool) {
    let data = &data[..data.len().min(MAX_INPUT)];
    let _ = pi_lib::session::list::summarize(data);
    let Ok(s) = pi_lib::session::Session::parse(&session_path(), data) else {
        return;
    };
    let nonblank = data
        .split(|b| *b == b'\n')
        .filter(|l| !l.trim_ascii().is_empty())
        .count();
    assert!(s.entries.len() < nonblank.max(1), "more entries than lines");
    let lines: Vec<&[u8]> = data.split(|b| *b == b'\n').collect();
    if s.migrated_from.is_none() {
        for (e, &no) in s.entries.iter().zip(&s.lines) {
            let original = lines[no - 1].trim_ascii();
            let written = e.to_line();
            // Invalid UTF-8 is kept as U+FFFD, as pi reads it.
            let before: Value =
                serde_json::from_str(&String::from_utf8_lossy(original)).unwrap_or(Value::Null);
            let after: Value = serde_json::from_str(&written).unwrap_or(Value::Null);
            assert!(
                keeps(&after, &before),
                "line {no}: the entry lost or changed data\n  written: {after}\n  read:    {before}"
            );
        }
    }
    if exact && s.migrated_from.is_none() {
        for (e, &no) in s.entries.iter().zip(&s.lines) {
            let original = lines[no - 1].trim_ascii();
            if canonical(original).is_some() {
                assert_eq!(
                    e.to_line(),
                    String::from_utf8_lossy(original),
                    "line {no}: a line as pi writes it must round trip byte for byte"
                );
            }
        }
    }
    let out = s.to_jsonl();
    let again = pi_lib::session::Session::parse(&session_path(), out.as_bytes())
        .unwrap_or_else(|e| panic!("our own output does not load: {e}"));
    assert_eq!(again.entries.len(), s.entries.len());
    assert_eq!(
        again.to_jsonl(),
        out,
        "write → read → write is a fixed point"
    );
    // Everything that walks a session.
    let _ = s.context(None);
    for e in s.entries.iter().take(8) {
        let _ = s.context(Some(e.id()));
    }
    let _ = (
        s.branch(),
        s.labels(),
        s.name(),
        s.children(),
        s.tree_rows(),
    );
    let _ = s.stats();
    let _ = pi_lib::session::export::to_markdown(&s);
    let _ = pi_lib::session::export::to_html(&s);
}

// ------------------------------------------------------------- templates

/// Template expansion: `data` is `template NUL arguments`.
pub fn template(data: &[u8]) {
    use pi_lib::prompt::expand::{split_args, split_frontmatter, substitute_args};
    let t = text(data);
    let (tpl, argtext) = t.split_once('\0').unwrap_or((&t, ""));
    let args = split_args(argtext);
    let all = args.join(" ");
    let out = substitute_args(tpl, &args);
    if !tpl.contains('$') {
        assert_eq!(out, tpl, "no placeholder, no change");
    }
    // Output is bounded by one full argument list per placeholder.
    let dollars = tpl.matches('$').count();
    assert!(out.len() <= tpl.len() + dollars * (all.len() + tpl.len()));
    assert_eq!(substitute_args("$@", &args), all);
    assert_eq!(substitute_args("$ARGUMENTS", &args), all);
    assert_eq!(substitute_args("${@:1}", &args), all);
    assert_eq!(
        substitute_args("$1", &args),
        args.first().cloned().unwrap_or_default()
    );
    assert_eq!(substitute_args("${2:-dflt}", &args), {
        let v = args.get(1).map(String::as_str).unwrap_or("");
        if v.is_empty() { "dflt" } else { v }.to_string()
    });
    // Without quotes, arguments are the whitespace-separated words.
    if !argtext.contains(['"', '\'']) {
        let words: Vec<&str> = argtext
            .split(pi_lib::prompt::expand::is_js_space)
            .filter(|w| !w.is_empty())
            .collect();
        assert_eq!(args, words);
    }
    let (front, body) = split_frontmatter(&t);
    if front.is_some() {
        assert!(t.starts_with("---"));
    } else {
        assert_eq!(body, t.replace("\r\n", "\n").replace('\r', "\n"));
    }
}

/// `split_args` undoes quoting: `args` (no quotes or backslashes in them)
/// written as `"a" "b c"` parse back to themselves.
pub fn template_args_round_trip(args: &[String]) {
    use pi_lib::prompt::expand::split_args;
    let quoted: Vec<String> = args.iter().map(|a| format!("\"{a}\"")).collect();
    assert_eq!(split_args(&quoted.join(" ")), args);
}

// ----------------------------------------------------------- frontmatter

/// Frontmatter: never panics; no frontmatter means the body is the text;
/// an error names a line of the file.
pub fn frontmatter(data: &[u8]) {
    use pi_lib::resources::frontmatter::{normalize_newlines, parse, parse_yaml};
    let t = text(data);
    // Lines as the parser counts them: CRLF and lone CR end a line too.
    let lines = normalize_newlines(&t).split('\n').count() + 1;
    match parse(&t) {
        Ok(p) => {
            if !p.has_frontmatter {
                assert_eq!(p.body, normalize_newlines(&t));
            }
        }
        Err(e) => assert!(e.line >= 1 && e.line <= lines, "error line {}", e.line),
    }
    let _ = parse_yaml(&t);
}

// ----------------------------------------------- models.json, settings.json

/// models.json: JSONC stripping keeps byte positions and never changes
/// strict JSON; errors are one line naming the file; applying the file to
/// the built-in registry never panics.
pub fn models_json(data: &[u8]) {
    use pi_lib::model::models_json::{apply, parse, strip_jsonc};
    let t = text(data);
    let path = Path::new("/fuzz/models.json");
    let clean = strip_jsonc(&t);
    assert_eq!(clean.len(), t.len(), "positions are kept");
    for (a, b) in t.bytes().zip(clean.bytes()) {
        assert!(a == b || b == b' ', "only blanking");
    }
    if let Ok(v) = serde_json::from_str::<Value>(&t) {
        if !t.contains("//") {
            let strict: Value = serde_json::from_str(&clean).expect("strict JSON stays JSON");
            assert_eq!(strict, v, "strict JSON means the same");
        }
    }
    match parse(&t, path) {
        Ok(map) => {
            let mut reg = builtin_registry().clone();
            if let Err(e) = apply(&mut reg, &map, path) {
                one_line_naming(&e.to_string(), path);
            }
        }
        Err(e) => one_line_naming(&e.to_string(), path),
    }
}

/// The built-in catalogue, parsed once per process.
fn builtin_registry() -> &'static pi_lib::model::ModelRegistry {
    static REG: std::sync::OnceLock<pi_lib::model::ModelRegistry> = std::sync::OnceLock::new();
    REG.get_or_init(|| {
        let dir = std::env::temp_dir().join("pi-fuzz-no-agent-dir");
        pi_lib::model::ModelRegistry::builtin_with_env(&dir, Default::default())
    })
}

fn one_line_naming(msg: &str, path: &Path) {
    assert!(!msg.contains('\n'), "one-line error: {msg:?}");
    assert!(
        msg.contains(&*path.to_string_lossy()),
        "names the file: {msg}"
    );
}

/// settings.json (global and project, merged): errors are one line naming
/// the file and a line:column inside it; the accessors never panic.
pub fn settings_json(data: &[u8], scratch: &Path) {
    let data = &data[..data.len().min(MAX_INPUT)];
    // First half: global file; second half: project file.
    let cut = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    let (global, project) = (&data[..cut], data.get(cut + 1..).unwrap_or(&[]));
    let agent = scratch.join("agent");
    let cwd = scratch.join("cwd");
    let _ = std::fs::create_dir_all(&agent);
    let _ = std::fs::create_dir_all(cwd.join(".pi"));
    let g = agent.join("settings.json");
    let p = cwd.join(".pi").join("settings.json");
    std::fs::write(&g, global).expect("scratch file");
    std::fs::write(&p, project).expect("scratch file");
    for (file, bytes) in [(&g, global), (&p, project)] {
        match pi_lib::settings::read_file(file) {
            Ok(m) => {
                let v: Value = serde_json::from_slice(bytes).unwrap_or(Value::Null);
                if let Value::Object(o) = v {
                    assert_eq!(m, o, "an object is read as is");
                }
            }
            Err(e) => {
                let msg = e.to_string();
                one_line_naming(&msg, file);
                if let pi_lib::settings::SettingsError::Json { line, .. } = e {
                    let lines = bytes.split(|b| *b == b'\n').count();
                    assert!(line >= 1 && line <= lines, "line {line} of {lines}");
                }
            }
        }
    }
    for trusted in [false, true] {
        if let Ok(s) = pi_lib::settings::Settings::load(&agent, &cwd, trusted) {
            let _ = (s.retry(), s.auto_resize_images(), s.default_tools());
            let _ = (s.str("defaultProvider"), s.str("defaultModel"));
        }
    }
}
