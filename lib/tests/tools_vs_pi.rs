//! The built-in tools against the real pi 1.6.0: every case of
//! `tests/oracle/tools/cases.json` is set up in a temp dir, run through our
//! tool, and compared with what pi's tool returned
//! (`tests/fixtures/pi-tools/expected.json`, made by
//! `tests/oracle/tools/capture.sh`). Also the tool definitions and the
//! system-prompt snippets/guidelines (`definitions.json`). No node needed.

use std::path::{Path, PathBuf};

use base64::Engine;
use pi_lib::tools::validate::validate_args;
use pi_lib::tools::{all_builtin, builtin, ToolContext, ToolOutput};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn load(rel: &str) -> Value {
    let text = std::fs::read_to_string(repo().join(rel)).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The bytes a setup file spec describes (mirrors `genContent` in capture.mjs).
fn gen(spec: &Value) -> Vec<u8> {
    if let Some(s) = spec.as_str() {
        return s.as_bytes().to_vec();
    }
    if let Some(b) = spec.get("base64").and_then(Value::as_str) {
        return base64::engine::general_purpose::STANDARD.decode(b).unwrap();
    }
    let text = spec["text"].as_str().unwrap();
    let count = spec["count"].as_u64().unwrap() as usize;
    match spec["gen"].as_str().unwrap() {
        "lines" => (1..=count)
            .map(|n| format!("{}\n", text.replace("{n}", &n.to_string())))
            .collect::<String>()
            .into_bytes(),
        "repeat" => text.repeat(count).into_bytes(),
        other => panic!("unknown gen {other}"),
    }
}

fn setup(cwd: &Path, case: &Value) {
    let Some(s) = case.get("setup") else { return };
    for d in s
        .get("dirs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        std::fs::create_dir_all(cwd.join(d.as_str().unwrap())).unwrap();
    }
    for (rel, spec) in s
        .get("files")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let p = cwd.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, gen(spec)).unwrap();
    }
}

/// Replaces machine-dependent paths like capture.mjs does.
fn normalise(v: &Value, cwd: &Path) -> Value {
    let s = serde_json::to_string(v).unwrap();
    let s = s.replace(&cwd.display().to_string(), "$CWD");
    let re = regex::Regex::new(r#"/[^"\s\]]*?/pi-bash-[0-9a-f]{16}\.log"#).unwrap();
    let s = re.replace_all(&s, "$$BASHLOG").into_owned();
    serde_json::from_str(&s).unwrap()
}

/// The text with the lines before the notices sorted (rg and fd print in
/// thread order, so pi's order across files is not deterministic).
fn unordered(text: &str) -> String {
    let (body, rest) = match text.find("\n\n[") {
        Some(i) => (&text[..i], &text[i..]),
        None => (text, ""),
    };
    let mut lines: Vec<&str> = body.split('\n').collect();
    lines.sort();
    format!("{}{rest}", lines.join("\n"))
}

fn first_text(content: &Value) -> String {
    content[0]["text"].as_str().unwrap_or("").to_string()
}

#[derive(Debug, PartialEq)]
enum Verdict {
    Exact,
    Unordered,
    CountOnly,
    Differs(String),
}

async fn run_case(case: &Value, expected: &Value) -> Verdict {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path().join("cwd");
    std::fs::create_dir(&cwd).unwrap();
    let cwd = cwd.canonicalize().unwrap();
    setup(&cwd, case);
    let args: Value = serde_json::from_str(
        &serde_json::to_string(&case["args"])
            .unwrap()
            .replace("$CWD", &cwd.display().to_string()),
    )
    .unwrap();
    let name = case["tool"].as_str().unwrap();
    let tool = builtin(name).unwrap();
    let ctx = ToolContext {
        tool_call_id: String::new(),
        caller: None,
        sandbox: Default::default(),
        host: None,
        env: Vec::new(),
        auto_resize_images: true,
        cwd: cwd.clone(),
        cancel: CancellationToken::new(),
    };
    // As the agent runs a call: validated (and coerced) first, a failure
    // answered with `details: {}`.
    let args = tool.prepare_arguments(args);
    let out = match validate_args(name, &tool.definition().parameters, &args) {
        Ok(args) => tool.execute(args, ctx, Box::new(|_| {})).await,
        Err(text) => {
            let mut out = ToolOutput::error(text);
            out.details = Some(json!({}));
            out
        }
    };
    let content = normalise(&serde_json::to_value(&out.content).unwrap(), &cwd);
    let details = out.details.as_ref().map(|d| normalise(d, &cwd));

    let mut problems = Vec::new();
    if out.is_error != expected["isError"].as_bool().unwrap() {
        problems.push(format!(
            "isError {} vs pi {}",
            out.is_error, expected["isError"]
        ));
    }
    if let Some(files) = expected.get("files").and_then(Value::as_object) {
        for (rel, want) in files {
            let got = std::fs::read(cwd.join(rel))
                .ok()
                .map(|b| base64::engine::general_purpose::STANDARD.encode(b));
            if got.as_deref() != want.as_str() {
                problems.push(format!("file {rel}: {got:?} vs pi {want}"));
            }
        }
    }
    // "content": pi's details are not deterministic (its rolling buffer
    // decodes chunks separately and may split a character), so only what
    // the model gets is compared.
    let want_details = if case.get("compare").and_then(Value::as_str) == Some("content") {
        details.clone()
    } else {
        expected.get("details").cloned()
    };
    let mut verdict = Verdict::Exact;
    if content != expected["content"] {
        let (ours, theirs) = (first_text(&content), first_text(&expected["content"]));
        let mode = case.get("compare").and_then(Value::as_str);
        let tool_name = case["tool"].as_str().unwrap();
        if mode == Some("notice-and-count")
            && ours.lines().count() == theirs.lines().count()
            && ours.rsplit("\n\n").next() == theirs.rsplit("\n\n").next()
        {
            verdict = Verdict::CountOnly;
        } else if (tool_name == "grep" || tool_name == "find")
            && unordered(&ours) == unordered(&theirs)
        {
            verdict = Verdict::Unordered;
        } else {
            problems.push(format!(
                "content differs:\n--- ours\n{}\n--- pi\n{}",
                clip(&content.to_string()),
                clip(&expected["content"].to_string())
            ));
        }
    }
    if details != want_details && verdict == Verdict::Exact {
        problems.push(format!(
            "details differ:\n--- ours\n{}\n--- pi\n{}",
            clip(&json!(details).to_string()),
            clip(&json!(want_details).to_string())
        ));
    }
    if problems.is_empty() {
        verdict
    } else {
        Verdict::Differs(problems.join("\n"))
    }
}

fn clip(s: &str) -> String {
    if s.len() > 1500 {
        let mut a = 700;
        while !s.is_char_boundary(a) {
            a += 1;
        }
        let mut b = s.len() - 700;
        while !s.is_char_boundary(b) {
            b += 1;
        }
        format!("{} …({} bytes)… {}", &s[..a], s.len(), &s[b..])
    } else {
        s.to_string()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn tools_match_pi_160() {
    let cases = load("tests/oracle/tools/cases.json");
    let expected = load("tests/fixtures/pi-tools/expected.json");
    let mut failures = Vec::new();
    let (mut exact, mut unordered_n, mut count_only) = (0, 0, 0);
    let cases = cases["cases"].as_array().unwrap();
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let Some(want) = expected.get(name) else {
            failures.push(format!("{name}: no expected result (run capture.sh)"));
            continue;
        };
        match run_case(case, want).await {
            Verdict::Exact => exact += 1,
            Verdict::Unordered => unordered_n += 1,
            Verdict::CountOnly => count_only += 1,
            Verdict::Differs(why) => failures.push(format!("{name}: {why}")),
        }
    }
    eprintln!(
        "tools vs pi 1.6.0: {} cases, {exact} exact, {unordered_n} equal up to rg/fd output order, {count_only} equal in count and notice, {} differ",
        cases.len(),
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn definitions_match_pi_160() {
    let want = load("tests/fixtures/pi-tools/definitions.json");
    let tools = all_builtin();
    let ours: Vec<Value> = tools
        .iter()
        .map(|t| {
            let d = t.definition();
            json!({"name": d.name, "description": d.description, "parameters": d.parameters})
        })
        .collect();
    // byte-exact, key order included
    assert_eq!(
        serde_json::to_string(&Value::Array(ours)).unwrap(),
        serde_json::to_string(&want["tools"]).unwrap()
    );
    let mut section = String::from("<tools>\n");
    for t in &tools {
        if let Some(s) = t.prompt_snippet() {
            section.push_str(&format!("- {}: {s}\n", t.definition().name));
        }
    }
    section.push_str("\nAdditional tools may be available.\n</tools>");
    assert_eq!(section, want["toolsSection"].as_str().unwrap());
    let mut rules = String::from("<rules>\n");
    for t in &tools {
        for g in t.prompt_guidelines() {
            rules.push_str(&format!("- {g}\n"));
        }
    }
    rules.push_str("- Be concise in your responses\n- Show file paths clearly when working with files\n</rules>");
    assert_eq!(rules, want["rulesSection"].as_str().unwrap());
}

#[tokio::test]
async fn bash_streams_and_aborts() {
    let tmp = tempfile::tempdir().unwrap();
    let cancel = CancellationToken::new();
    let ctx = ToolContext {
        tool_call_id: String::new(),
        caller: None,
        sandbox: Default::default(),
        host: None,
        env: Vec::new(),
        auto_resize_images: true,
        cwd: tmp.path().to_path_buf(),
        cancel: cancel.clone(),
    };
    let updates = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = updates.clone();
    let tool = builtin("bash").unwrap();
    let c2 = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        c2.cancel();
    });
    let started = std::time::Instant::now();
    let out = tool
        .execute(
            json!({"command": "echo one; sleep 0.1; echo two; sleep 30 & sleep 30"}),
            ctx,
            Box::new(move |o| sink.lock().unwrap().push(o)),
        )
        .await;
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert!(out.is_error);
    let text = serde_json::to_value(&out.content).unwrap()[0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(text, "one\ntwo\n\n\nCommand aborted");
    assert!(updates.lock().unwrap().len() >= 2);
}
