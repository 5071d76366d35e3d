//! `pi-session compact` and `branch --summarize`: the entries they write,
//! the requests they send, and (with the oracle) pi 1.6.0's own choices
//! for the same file and settings.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::common::*;

/// The compaction-160 fixture cut just before pi's compaction entry: the
/// file pi 1.6.0 compacted over RPC with `keepRecentTokens: 1`. Returns
/// the file and pi's entry.
fn before_pi_compaction(sb: &Sandbox) -> (PathBuf, Value) {
    cut_before_compaction(sb.fixture_file("compaction-160"))
}

/// [`before_pi_compaction`] on `file` (a copy of that fixture).
fn cut_before_compaction(file: PathBuf) -> (PathBuf, Value) {
    let text = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.contains(r#""type":"compaction""#))
        .unwrap();
    std::fs::write(&file, lines[..at].join("\n") + "\n").unwrap();
    (file, serde_json::from_str(lines[at]).unwrap())
}

fn types(recs: &[Value]) -> Vec<&str> {
    recs.iter()
        .map(|r| r["type"].as_str().unwrap_or(""))
        .collect()
}

fn keys(v: &Value) -> Vec<String> {
    v.as_object().unwrap().keys().cloned().collect()
}

/// The user text of a recorded Chat Completions request.
fn user_text(req: &Value) -> String {
    let msgs = req["messages"].as_array().unwrap();
    let u = msgs.iter().find(|m| m["role"] == "user").unwrap();
    match &u["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        other => panic!("user content {other}"),
    }
}

#[test]
fn compact_appends_pi_entry_through_the_model() {
    let sb = Sandbox::with_fixtures();
    let (file, pis) = before_pi_compaction(&sb);
    let before = std::fs::read_to_string(&file).unwrap();
    let server = ScriptServer::start(vec![
        Reply::Sse(sse_text("HISTORY")),
        Reply::Sse(sse_text("PREFIX")),
    ]);
    server.configure(&sb.agent());
    let f = file.to_str().unwrap();
    let out = sb.session(&[
        "compact",
        f,
        "--keep-recent-tokens",
        "1",
        "--instructions",
        "the lexer",
    ]);
    ok(&out);
    let recs = jsonl(&out);
    assert_eq!(
        types(&recs),
        ["compaction_start", "compaction_end", "entry_appended"]
    );
    assert_eq!(
        recs[0],
        json!({"type": "compaction_start", "reason": "manual"})
    );
    let entry = &recs[2]["entry"];
    // pi's keys in pi's order, pi's cut point and token count.
    assert_eq!(keys(entry), keys(&pis));
    assert_eq!(entry["firstKeptEntryId"], pis["firstKeptEntryId"]);
    assert_eq!(entry["tokensBefore"], pis["tokensBefore"]);
    assert_eq!(entry["parentId"], pis["parentId"]);
    assert_eq!(entry["fromHook"], false);
    assert_eq!(entry["details"], pis["details"]);
    assert_eq!(
        entry["summary"],
        "HISTORY\n\n---\n\n**Turn Context (split turn):**\n\nPREFIX"
    );
    // Both calls' usage, summed.
    assert_eq!(entry["usage"]["input"], 200);
    assert_eq!(entry["usage"]["output"], 20);
    let mut sys = entry["systemMessage"].clone();
    let mut pis_sys = pis["systemMessage"].clone();
    assert!(sys["timestamp"].take().as_i64().is_some());
    pis_sys["timestamp"].take();
    assert_eq!(sys, pis_sys);
    let end = &recs[1];
    assert_eq!(end["result"]["summary"], entry["summary"]);
    assert_eq!(end["aborted"], false);
    assert_eq!(end["willRetry"], false);
    assert!(end["result"]["estimatedTokensAfter"].as_u64().unwrap() > 0);
    // The requests: history first (with the focus), then the turn prefix;
    // no tools.
    let reqs = server.requests.lock().unwrap().clone();
    assert_eq!(reqs.len(), 2);
    assert!(reqs.iter().all(|r| r.get("tools").is_none()));
    let h = user_text(&reqs[0]);
    assert!(
        h.starts_with(
            "<conversation>\n[User]: Plan a parser in Rust.\n\n[Assistant]: We will build"
        ),
        "{h}"
    );
    assert!(h.ends_with("\n\nAdditional focus: the lexer"), "{h}");
    assert!(!h.contains("<previous-summary>"));
    let p = user_text(&reqs[1]);
    assert!(
        p.starts_with("# Conversation\n[User]: What is step two?\n\n# Instructions\n"),
        "{p}"
    );
    // Only appended.
    let after = std::fs::read_to_string(&file).unwrap();
    assert!(after.starts_with(&before));
    assert_eq!(after.lines().count(), before.lines().count() + 1);
    // The context now starts with the checkpoint and the summary.
    let ctx = jsonl(&sb.session(&["context", f, "--format", "jsonl"]));
    let roles: Vec<&str> = ctx[1..]
        .iter()
        .map(|r| r["message"]["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "compactionSummary", "assistant"]);
    // A second compaction right away has nothing to do: it says so,
    // writes nothing and exits 0 (not the usage error's 2).
    let again = sb.session(&["compact", f, "--keep-recent-tokens", "1"]);
    assert_eq!(again.status.code(), Some(0));
    assert!(
        stderr(&again).contains("Already compacted"),
        "{}",
        stderr(&again)
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), after);
}

#[test]
fn compact_dry_run_plans_without_a_model() {
    let sb = Sandbox::with_fixtures();
    let (file, pis) = before_pi_compaction(&sb);
    let before = std::fs::read_to_string(&file).unwrap();
    // No models.json: a model call would fail.
    let f = file.to_str().unwrap();
    let out = sb.session(&["compact", f, "--dry-run", "--keep-recent-tokens", "1"]);
    let recs = jsonl(&out);
    ok(&out);
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0]["type"], "compaction_plan");
    assert_eq!(recs[0]["firstKeptEntryId"], pis["firstKeptEntryId"]);
    assert_eq!(recs[0]["tokensBefore"], pis["tokensBefore"]);
    assert_eq!(recs[0]["splitTurn"], true);
    assert_eq!(recs[0]["messagesToSummarize"], 2);
    assert_eq!(recs[0]["turnPrefixMessages"], 1);
    let text = stdout(&sb.session(&[
        "compact",
        f,
        "--dry-run",
        "--keep-recent-tokens",
        "1",
        "--format",
        "text",
    ]));
    assert!(
        text.starts_with("would keep from 2fa34749, splitting its turn (178 tokens before"),
        "{text}"
    );
    // The default budget keeps everything of this short chat.
    let small = sb.session(&["compact", f, "--dry-run"]);
    assert_eq!(small.status.code(), Some(0));
    assert!(stderr(&small).contains("Nothing to compact (session too small)"));
    // compaction.keepRecentTokens from settings.json is the default.
    std::fs::write(
        sb.agent().join("settings.json"),
        r#"{"compaction":{"keepRecentTokens":1}}"#,
    )
    .unwrap();
    let set = jsonl(&sb.session(&["compact", f, "--dry-run"]));
    assert_eq!(set[0]["keepRecentTokens"], 1);
    std::fs::write(
        sb.agent().join("settings.json"),
        r#"{"compaction":{"keepRecentTokens":-3}}"#,
    )
    .unwrap();
    let bad = sb.session(&["compact", f, "--dry-run"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr(&bad).contains("compaction.keepRecentTokens"),
        "{}",
        stderr(&bad)
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), before);
}

#[test]
fn compact_failure_writes_nothing() {
    let sb = Sandbox::with_fixtures();
    let (file, _) = before_pi_compaction(&sb);
    let before = std::fs::read_to_string(&file).unwrap();
    let server = ScriptServer::start(vec![Reply::Status(
        400,
        r#"{"error":{"message":"bad request here"}}"#.into(),
    )]);
    server.configure(&sb.agent());
    let out = sb.session(&[
        "compact",
        file.to_str().unwrap(),
        "--keep-recent-tokens",
        "1",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("Summarization failed: "),
        "{}",
        stderr(&out)
    );
    let recs = jsonl(&out);
    assert_eq!(types(&recs), ["compaction_start", "compaction_end"]);
    assert!(recs[1].get("result").is_none());
    assert!(recs[1]["errorMessage"]
        .as_str()
        .unwrap()
        .starts_with("Compaction failed: Summarization failed: "));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), before);
}

#[test]
fn compact_loads_and_compacts_073_sessions() {
    let sb = Sandbox::with_fixtures();
    let file = sb.fixture_file("tools-073");
    let server = ScriptServer::start(vec![Reply::Sse(sse_text("S073"))]);
    server.configure(&sb.agent());
    let f = file.to_str().unwrap();
    let plan = jsonl(&sb.session(&["compact", f, "--dry-run", "--keep-recent-tokens", "1"]));
    assert_eq!(plan[0]["type"], "compaction_plan");
    let out = sb.session(&["compact", f, "--keep-recent-tokens", "1"]);
    ok(&out);
    let recs = jsonl(&out);
    let entry = &recs.last().unwrap()["entry"];
    assert_eq!(entry["type"], "compaction");
    assert_eq!(entry["firstKeptEntryId"], plan[0]["firstKeptEntryId"]);
    // The cut splits the last turn and nothing precedes it: pi's text for
    // an empty history, then the prefix summary.
    assert_eq!(plan[0]["messagesToSummarize"], 0);
    assert_eq!(
        entry["summary"],
        "No prior history.\n\n---\n\n**Turn Context (split turn):**\n\nS073\n\n<read-files>\nnotes.txt\n</read-files>"
    );
    assert_eq!(server.requests.lock().unwrap().len(), 1);
}

#[test]
fn branch_summarize_records_the_abandoned_path() {
    let sb = Sandbox::with_fixtures();
    let (file, _) = before_pi_compaction(&sb);
    let server = ScriptServer::start(vec![Reply::Sse(sse_text("BRANCH"))]);
    server.configure(&sb.agent());
    let f = file.to_str().unwrap();
    let out = sb.session(&[
        "branch",
        f,
        "--to",
        "d0c29d2a",
        "--summarize",
        "--instructions",
        "step two",
    ]);
    ok(&out);
    let recs = jsonl(&out);
    assert_eq!(types(&recs), ["entry_appended"]);
    let e = &recs[0]["entry"];
    assert_eq!(
        keys(e),
        [
            "type",
            "id",
            "parentId",
            "timestamp",
            "fromId",
            "summary",
            "details",
            "usage",
            "fromHook"
        ]
    );
    // The target is a user message: the leaf goes to its parent (pi sends
    // the message again from there).
    assert_eq!(e["parentId"], "165f6dc9");
    // fromId is the leaf that was left, as in pi 1.6.0.
    assert_eq!(e["fromId"], "2fa34749");
    assert_eq!(
        e["summary"],
        "The user explored a different conversation branch before returning here.\nSummary of that exploration:\n\nBRANCH"
    );
    assert_eq!(e["fromHook"], false);
    let reqs = server.requests.lock().unwrap().clone();
    let u = user_text(&reqs[0]);
    assert!(
        u.starts_with("<conversation>\n[Assistant]: We will build"),
        "{u}"
    );
    assert!(u.contains("[User]: What is step two?"), "{u}");
    assert!(u.ends_with("\n\nAdditional focus: step two"), "{u}");
    // The model sees the summary right after the system prompt.
    let ctx = jsonl(&sb.session(&["context", f, "--format", "jsonl"]));
    let roles: Vec<&str> = ctx[1..]
        .iter()
        .map(|r| r["message"]["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "branchSummary"]);
    // --instructions needs --summarize.
    let bad = sb.session(&["branch", f, "--to", "d0c29d2a", "--instructions", "x"]);
    assert_eq!(bad.status.code(), Some(2));
}

/// Runs pi 1.6.0 over RPC in `cwd`: `commands`, against `mock`.
fn pi_rpc(o: &Oracle, sb: &Sandbox, commands: &Value) -> Output {
    let mut c = std::process::Command::new(&o.node22);
    c.arg(repo().join("tests/oracle/rpc-drive.mjs"))
        .arg("--")
        .arg(&o.node22)
        .arg(&o.pi160_cli)
        .args(["--mode", "rpc"])
        .env_clear()
        .env("HOME", sb.root().join("home"))
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("PI_CODING_AGENT_DIR", sb.agent())
        .env("PI_OFFLINE", "1")
        .current_dir(sb.cwd())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(commands.to_string().as_bytes()).unwrap();
    }
    child.wait_with_output().unwrap()
}

use std::process::Output;

/// The one session file under the sandbox's sessions folder.
fn only_session(sb: &Sandbox) -> PathBuf {
    fn walk(d: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "jsonl") {
                out.push(p);
            }
        }
    }
    let mut v = Vec::new();
    walk(&sb.agent().join("sessions"), &mut v);
    assert_eq!(v.len(), 1, "{v:?}");
    v.remove(0)
}

fn requests(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// For several `keepRecentTokens`, pi 1.6.0's RPC `compact` and our
/// `compact --dry-run` pick the same cut and token count on the file pi
/// wrote (tool calls, so some cuts split a turn); pi 1.6.0 continues the
/// file we compacted, sending our checkpoint and summary first; and our
/// `context` equals pi's `buildSessionContext` on both compacted files.
#[test]
fn compact_matches_pi_160_rpc() {
    let Some(o) = Oracle::find("compact_matches_pi_160_rpc") else {
        return;
    };
    let (mut splits, mut whole, mut refusals) = (0, 0, 0);
    // 154 lands on the second user message (a cut between turns); the
    // others inside a turn.
    for keep in [1u64, 40, 120, 154] {
        let sb = Sandbox::new();
        std::fs::write(sb.cwd().join("a.txt"), "alpha file\n".repeat(20)).unwrap();
        std::fs::write(sb.cwd().join("b.txt"), "beta file\n".repeat(30)).unwrap();
        // Summary requests are answered by matching turns (the history
        // call carries `<conversation>`, the turn-prefix call `# Conversation`);
        // the agent's requests take the others in order.
        let turns = json!([
            {"tool_calls": [{"name": "read", "arguments": {"path": "a.txt"}}]},
            {"text": "a.txt holds alpha lines."},
            {"tool_calls": [{"name": "read", "arguments": {"path": "b.txt"}}]},
            {"tool_calls": [{"name": "read", "arguments": {"path": "a.txt"}}]},
            {"text": "b.txt holds beta lines, a.txt alpha."},
            {"text": "Both are plain text files of repeated lines."},
            {"match": "<conversation>", "text": "PI SUMMARY"},
            {"match": "<conversation>", "text": "PI SUMMARY 2"},
            {"match": "# Conversation", "text": "PI PREFIX"},
            {"match": "# Conversation", "text": "PI PREFIX 2"}
        ]);
        let mock = MockLlm::start(&o, sb.root(), &turns);
        mock.configure(&sb.agent());
        std::fs::write(
            sb.agent().join("settings.json"),
            json!({"defaultProvider": "mock", "defaultModel": "mock-model",
                   "compaction": {"keepRecentTokens": keep}})
            .to_string(),
        )
        .unwrap();
        let out = pi_rpc(
            &o,
            &sb,
            &json!([
                {"type": "prompt", "message": "What is in a.txt?"},
                {"type": "prompt", "message": "And b.txt, compared with a.txt?"},
                {"type": "compact"},
                {"type": "prompt", "message": "Summing up?"},
                {"type": "compact"}
            ]),
        );
        drop(mock);
        // The responses: every command succeeds, except that the second
        // compaction may find nothing to compact.
        let responses: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|_| panic!("keep {keep}: {}{}", stdout(&out), stderr(&out)));
        let responses = responses.as_array().unwrap();
        assert_eq!(responses.len(), 5, "keep {keep}: {responses:?}");
        assert!(
            responses[..4].iter().all(|r| r["success"] == true),
            "keep {keep}: {responses:?}"
        );
        let second_error = responses[4]["error"].as_str().map(str::to_string);
        let pi_file = only_session(&sb);
        let text = std::fs::read_to_string(&pi_file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let ats: Vec<usize> = (0..lines.len())
            .filter(|&i| lines[i].contains(r#""type":"compaction""#))
            .collect();
        assert_eq!(
            ats.len(),
            1 + usize::from(second_error.is_none()),
            "keep {keep}"
        );
        if let Some(e) = &second_error {
            // pi refused the second compaction: so do we, with its words.
            let refused = sb.session(&[
                "compact",
                pi_file.to_str().unwrap(),
                "--dry-run",
                "--keep-recent-tokens",
                &keep.to_string(),
            ]);
            // Nothing to do is not a usage error: exit 0.
            assert_eq!(refused.status.code(), Some(0), "keep {keep}");
            assert!(
                stderr(&refused).contains(e.as_str()),
                "keep {keep}: {e} vs {}",
                stderr(&refused)
            );
            refusals += 1;
        }
        let ours_dir = sb.root().join("ours");
        std::fs::create_dir_all(&ours_dir).unwrap();
        let ours = ours_dir.join("s.jsonl");
        let o_file = ours.to_str().unwrap();
        let mut pis = Value::Null;
        // Our plan on the same file just before each of pi's compactions
        // (the second one updates the first's summary).
        for &at in &ats {
            pis = serde_json::from_str(lines[at]).unwrap();
            std::fs::write(&ours, lines[..at].join("\n") + "\n").unwrap();
            let plan = jsonl(&sb.session(&[
                "compact",
                o_file,
                "--dry-run",
                "--keep-recent-tokens",
                &keep.to_string(),
            ]));
            let what = format!("keep {keep}, line {}", at + 1);
            assert_eq!(
                plan[0]["firstKeptEntryId"], pis["firstKeptEntryId"],
                "{what}"
            );
            assert_eq!(plan[0]["tokensBefore"], pis["tokensBefore"], "{what}");
            assert_eq!(plan[0]["previousSummary"], at != ats[0], "{what}");
            let pi_split = pis["summary"]
                .as_str()
                .unwrap()
                .contains("**Turn Context (split turn):**");
            assert_eq!(plan[0]["splitTurn"], pi_split, "{what}");
            splits += usize::from(pi_split);
            whole += usize::from(!pi_split);
            eprintln!(
                "{what}: pi chose {} (tokensBefore {}, split {pi_split})",
                pis["firstKeptEntryId"], pis["tokensBefore"]
            );
        }
        // Our compaction of the same file, continued by pi 1.6.0.
        let mock = MockLlm::start(
            &o,
            &ours_dir,
            &json!([{"text": "OUR SUMMARY"}, {"text": "OUR PREFIX"}]),
        );
        mock.configure(&sb.agent());
        let out = sb.session(&["compact", o_file, "--keep-recent-tokens", &keep.to_string()]);
        ok(&out);
        let entry = jsonl(&out).last().unwrap()["entry"].clone();
        assert_eq!(entry["details"], pis["details"], "keep {keep}");
        assert_eq!(keys(&entry), keys(&pis), "keep {keep}");
        drop(mock);
        for f in [&pi_file, &ours] {
            let (msgs, _) = {
                let out = sb.session(&["context", f.to_str().unwrap(), "--format", "jsonl"]);
                let recs = jsonl(&out);
                (
                    recs[1..]
                        .iter()
                        .map(|r| r["message"].clone())
                        .collect::<Vec<_>>(),
                    recs[0].clone(),
                )
            };
            let live: Value =
                serde_json::from_slice(&o.node("sdk-context.mjs", &[f.to_str().unwrap()]).stdout)
                    .unwrap();
            assert_eq!(
                Value::Array(msgs),
                live["messages"],
                "keep {keep}: {}",
                f.display()
            );
        }
        let cont = sb.root().join("cont");
        std::fs::create_dir_all(&cont).unwrap();
        let mock = MockLlm::start(&o, &cont, &json!([{"text": "continued"}]));
        mock.configure(&sb.agent());
        let c = o
            .pi160(&sb)
            .args(["--session", o_file, "-p", "go on"])
            .output()
            .unwrap();
        assert!(c.status.success(), "keep {keep}: {}", stderr(&c));
        assert_eq!(stdout(&c).trim(), "continued");
        let reqs = requests(&mock.log);
        let msgs = reqs.last().unwrap()["body"]["messages"]
            .as_array()
            .unwrap()
            .clone();
        assert_eq!(msgs[0]["role"], "system", "keep {keep}");
        let first_user = match &msgs[1]["content"] {
            Value::String(s) => s.clone(),
            Value::Array(p) => p.iter().filter_map(|x| x["text"].as_str()).collect(),
            _ => String::new(),
        };
        assert!(
            first_user.starts_with(
                "The conversation history before this point was compacted into the following summary:\n\n<summary>\n"
            ) && first_user.contains("OUR "),
            "keep {keep}: {first_user}"
        );
    }
    assert!(splits >= 1, "no split turn among the cases");
    assert!(whole >= 1, "no cut between turns among the cases");
    eprintln!("{splits} split, {whole} whole-turn cuts, {refusals} refusals compared");
}

/// Navigating to a user message with a summary: pi 1.6.0 (its tree
/// navigation, driven by an extension command) puts the leaf at the
/// message's parent, summarises the path after the message, and records
/// `fromId` = the old leaf; `branch --to USER --summarize` does the same on
/// a copy of the file.
#[test]
fn branch_summarize_to_user_message_matches_pi_160() {
    let Some(o) = Oracle::find("branch_summarize_to_user_message_matches_pi_160") else {
        return;
    };
    let sb = Sandbox::new();
    let mock = MockLlm::start(
        &o,
        sb.root(),
        &json!([{"text": "answer one"}, {"text": "answer two"}]),
    );
    mock.configure(&sb.agent());
    let out = o
        .pi160(&sb)
        .args(["-p", "question one", "question two"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    drop(mock);
    let pi_file = only_session(&sb);
    let text = std::fs::read_to_string(&pi_file).unwrap();
    let entries: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let users: Vec<&Value> = entries
        .iter()
        .filter(|e| e["message"]["role"] == "user")
        .collect();
    let target = users[1]["id"].as_str().unwrap().to_string();
    let parent = users[1]["parentId"].clone();
    let old_leaf = entries.last().unwrap()["id"].clone();
    let ours = sb.root().join("ours.jsonl");
    std::fs::write(&ours, &text).unwrap();
    let ext = sb.root().join("nav.ts");
    std::fs::write(
        &ext,
        r#"export default function (pi: any) {
  pi.registerCommand("nav", {
    description: "navigate the tree with a summary",
    handler: async (args: string, ctx: any) => {
      await ctx.navigateTree(args.trim(), { summarize: true });
    },
  });
}
"#,
    )
    .unwrap();
    let summary_turn = json!([{"match": "<conversation>", "text": "BRANCH SUMMARY"}]);
    let pi_dir = sb.root().join("pi-nav");
    std::fs::create_dir_all(&pi_dir).unwrap();
    let mock = MockLlm::start(&o, &pi_dir, &summary_turn);
    mock.configure(&sb.agent());
    let out = o
        .pi160(&sb)
        .args(["--session", pi_file.to_str().unwrap(), "-e"])
        .arg(&ext)
        .args(["-p", &format!("/nav {target}")])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let pi_reqs = requests(&mock.log);
    drop(mock);
    let our_dir = sb.root().join("our-nav");
    std::fs::create_dir_all(&our_dir).unwrap();
    let mock = MockLlm::start(&o, &our_dir, &summary_turn);
    mock.configure(&sb.agent());
    let out = sb.session(&[
        "branch",
        ours.to_str().unwrap(),
        "--to",
        &target,
        "--summarize",
    ]);
    ok(&out);
    let our_reqs = requests(&mock.log);
    drop(mock);
    let last = |f: &Path| -> Value {
        let t = std::fs::read_to_string(f).unwrap();
        serde_json::from_str(t.lines().last().unwrap()).unwrap()
    };
    let (p, q) = (last(&pi_file), last(&ours));
    assert_eq!(p["type"], "branch_summary");
    assert_eq!(q["type"], "branch_summary");
    assert_eq!(p["parentId"], parent);
    assert_eq!(q["parentId"], parent);
    assert_eq!(p["fromId"], old_leaf);
    assert_eq!(q["fromId"], old_leaf);
    assert_eq!(q["summary"], p["summary"]);
    assert_eq!(keys(&q), keys(&p));
    // The same abandoned path was summarised (the target itself is not).
    let conversation = |reqs: &[Value]| -> String {
        let u = user_text(&reqs[0]["body"]);
        u.split("</conversation>").next().unwrap_or("").to_string()
    };
    assert_eq!(conversation(&our_reqs), conversation(&pi_reqs));
    assert_eq!(
        conversation(&our_reqs),
        "<conversation>\n[Assistant]: answer two\n"
    );
    // And both files read back the same, as pi reads them.
    for f in [&pi_file, &ours] {
        let recs = jsonl(&sb.session(&["context", f.to_str().unwrap(), "--format", "jsonl"]));
        let msgs: Vec<Value> = recs[1..].iter().map(|r| r["message"].clone()).collect();
        let live: Value =
            serde_json::from_slice(&o.node("sdk-context.mjs", &[f.to_str().unwrap()]).stdout)
                .unwrap();
        assert_eq!(Value::Array(msgs), live["messages"], "{}", f.display());
    }
}

/// The fixtures pi 1.6.0 and 0.73.1 wrote: pi 1.6.0's own RPC `compact`
/// on each file (several budgets) and our `compact --dry-run` on a copy of
/// the same file choose the same `firstKeptEntryId` and `tokensBefore`
/// (split turns included), or refuse with the same words.
#[test]
fn compact_plan_matches_pi_160_on_the_fixtures() {
    let Some(o) = Oracle::find("compact_plan_matches_pi_160_on_the_fixtures") else {
        return;
    };
    let (mut compared, mut splits, mut refused) = (0, 0, 0);
    for scenario in [
        "tools-160",
        "compaction-160",
        "branched-160",
        "custom-160",
        "tools-073",
        "plain-073",
    ] {
        for keep in [1u64, 30] {
            let sb = Sandbox::with_fixtures();
            let file = sb.fixture_file(scenario);
            let copy = sb.root().join("copy.jsonl");
            std::fs::copy(&file, &copy).unwrap();
            let before = std::fs::read_to_string(&file).unwrap().lines().count();
            let mock = MockLlm::start(&o, sb.root(), &json!([{"text": "S1"}, {"text": "S2"}]));
            mock.configure(&sb.agent());
            std::fs::write(
                sb.agent().join("settings.json"),
                json!({"defaultProvider": "mock", "defaultModel": "mock-model",
                       "compaction": {"keepRecentTokens": keep}})
                .to_string(),
            )
            .unwrap();
            let mut c = std::process::Command::new(&o.node22);
            c.arg(repo().join("tests/oracle/rpc-drive.mjs"))
                .arg("--")
                .arg(&o.node22)
                .arg(&o.pi160_cli)
                .args(["--mode", "rpc", "--session"])
                .arg(&file)
                .env_clear()
                .env("HOME", sb.root().join("home"))
                .env("PATH", std::env::var("PATH").unwrap_or_default())
                .env("PI_CODING_AGENT_DIR", sb.agent())
                .env("PI_OFFLINE", "1")
                .current_dir(sb.cwd())
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            let mut child = c.spawn().unwrap();
            {
                use std::io::Write;
                let mut stdin = child.stdin.take().unwrap();
                stdin.write_all(br#"[{"type": "compact"}]"#).unwrap();
            }
            let out = child.wait_with_output().unwrap();
            drop(mock);
            let what = format!("{scenario}, keep {keep}");
            let responses: Value = serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|_| panic!("{what}: {}{}", stdout(&out), stderr(&out)));
            let r = &responses[0];
            let plan = sb.session(&[
                "compact",
                copy.to_str().unwrap(),
                "--dry-run",
                "--keep-recent-tokens",
                &keep.to_string(),
                "--format",
                "jsonl",
            ]);
            if r["success"] == true {
                ok(&plan);
                let plan = &jsonl(&plan)[0];
                let text = std::fs::read_to_string(&file).unwrap();
                let entry: Value = text
                    .lines()
                    .skip(before)
                    .map(|l| serde_json::from_str::<Value>(l).unwrap())
                    .find(|e| e["type"] == "compaction")
                    .unwrap_or_else(|| panic!("{what}: no compaction entry"));
                assert_eq!(
                    plan["firstKeptEntryId"], entry["firstKeptEntryId"],
                    "{what}"
                );
                assert_eq!(plan["tokensBefore"], entry["tokensBefore"], "{what}");
                let pi_split = entry["summary"]
                    .as_str()
                    .unwrap()
                    .contains("**Turn Context (split turn):**");
                assert_eq!(plan["splitTurn"], pi_split, "{what}");
                splits += usize::from(pi_split);
                compared += 1;
            } else {
                let e = r["error"].as_str().unwrap();
                assert_eq!(plan.status.code(), Some(0), "{what}");
                assert!(
                    stderr(&plan).contains(e),
                    "{what}: {e} vs {}",
                    stderr(&plan)
                );
                refused += 1;
            }
        }
    }
    assert!(compared >= 6, "{compared} compared");
    assert!(splits >= 1, "no split turn");
    eprintln!("{compared} plans compared ({splits} split), {refused} refusals");
}

/// settings.json for the mock with `keepRecentTokens: 1` and quick
/// retries (`retry` merged over pi's defaults).
fn retry_settings(agent: &Path, retry: Value) {
    std::fs::write(
        agent.join("settings.json"),
        json!({"defaultProvider": "mock", "defaultModel": "mock-model",
               "compaction": {"keepRecentTokens": 1}, "retry": retry})
        .to_string(),
    )
    .unwrap();
}

/// A transient failure of a summary request (HTTP 500) is retried under
/// `retry.*`, reporting pi's `summarization_retry_*` records between
/// `compaction_start` and `compaction_end`; the compaction then succeeds.
#[test]
fn compact_retries_a_transient_summary_failure() {
    let sb = Sandbox::with_fixtures();
    let (file, pis) = before_pi_compaction(&sb);
    let server = ScriptServer::start(vec![
        Reply::Status(500, r#"{"error":{"message":"boom"}}"#.into()),
        Reply::Sse(sse_text("HISTORY")),
        Reply::Sse(sse_text("PREFIX")),
    ]);
    server.configure(&sb.agent());
    retry_settings(&sb.agent(), json!({"baseDelayMs": 7}));
    let out = sb.session(&["compact", file.to_str().unwrap()]);
    ok(&out);
    let recs = jsonl(&out);
    assert_eq!(
        types(&recs),
        [
            "compaction_start",
            "summarization_retry_scheduled",
            "summarization_retry_attempt_start",
            "summarization_retry_finished",
            "compaction_end",
            "entry_appended"
        ]
    );
    let s = &recs[1];
    assert_eq!(
        keys(s),
        ["type", "attempt", "maxAttempts", "delayMs", "errorMessage"]
    );
    assert_eq!(
        (&s["attempt"], &s["maxAttempts"], &s["delayMs"]),
        (&json!(1), &json!(3), &json!(7))
    );
    assert!(s["errorMessage"].as_str().unwrap().contains("boom"), "{s}");
    assert_eq!(
        recs[2],
        json!({"type": "summarization_retry_attempt_start", "source": "compaction", "reason": "manual"})
    );
    let entry = &recs[5]["entry"];
    assert_eq!(entry["firstKeptEntryId"], pis["firstKeptEntryId"]);
    assert_eq!(
        entry["summary"],
        "HISTORY\n\n---\n\n**Turn Context (split turn):**\n\nPREFIX"
    );
    assert_eq!(server.requests.lock().unwrap().len(), 3);
}

/// `retry.enabled: false` makes the first transient failure final, and
/// retries stop after `retry.maxRetries`: the error is the last attempt's,
/// nothing is written.
#[test]
fn compact_summary_retries_follow_the_retry_settings() {
    for (retry, requests, scheduled) in [
        (json!({"enabled": false}), 1, 0),
        (json!({"maxRetries": 2, "baseDelayMs": 1}), 3, 2),
    ] {
        let sb = Sandbox::with_fixtures();
        let (file, _) = before_pi_compaction(&sb);
        let before = std::fs::read_to_string(&file).unwrap();
        let server = ScriptServer::start(vec![Reply::Status(
            503,
            r#"{"error":{"message":"overloaded"}}"#.into(),
        )]);
        server.configure(&sb.agent());
        retry_settings(&sb.agent(), retry.clone());
        let out = sb.session(&["compact", file.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{retry}: {}", stderr(&out));
        let recs = jsonl(&out);
        let n = types(&recs)
            .iter()
            .filter(|t| **t == "summarization_retry_scheduled")
            .count();
        assert_eq!(n, scheduled, "{retry}: {recs:?}");
        assert_eq!(
            types(&recs).last(),
            Some(&"compaction_end"),
            "{retry}: {recs:?}"
        );
        assert_eq!(
            types(&recs).contains(&"summarization_retry_finished"),
            scheduled > 0
        );
        assert_eq!(server.requests.lock().unwrap().len(), requests, "{retry}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), before);
    }
}

/// `branch --summarize` retries its summary request the same way
/// (`source: "branchSummary"`, no reason); text output warns per retry.
#[test]
fn branch_summarize_retries_a_transient_failure() {
    let sb = Sandbox::with_fixtures();
    let (file, _) = before_pi_compaction(&sb);
    let server = ScriptServer::start(vec![
        Reply::Status(429, r#"{"error":{"message":"slow down"}}"#.into()),
        Reply::Sse(sse_text("BRANCH")),
    ]);
    server.configure(&sb.agent());
    retry_settings(&sb.agent(), json!({"baseDelayMs": 1}));
    let f = file.to_str().unwrap();
    let out = sb.session(&["branch", f, "--to", "d0c29d2a", "--summarize"]);
    ok(&out);
    let recs = jsonl(&out);
    assert_eq!(
        types(&recs),
        [
            "summarization_retry_scheduled",
            "summarization_retry_attempt_start",
            "summarization_retry_finished",
            "entry_appended"
        ]
    );
    assert_eq!(
        recs[1],
        json!({"type": "summarization_retry_attempt_start", "source": "branchSummary"})
    );
    assert!(recs[3]["entry"]["summary"]
        .as_str()
        .unwrap()
        .ends_with("BRANCH"));
    assert_eq!(server.requests.lock().unwrap().len(), 2);
}

/// pi 1.6.0's RPC `compact` against a mock whose first summary request
/// fails with HTTP 500, side by side with our `pi-run --mode rpc` and
/// `pi-session compact` on the same file and mock script: the same
/// `summarization_retry_*` records (pi's error text included) between
/// `compaction_start` and `compaction_end`, the same number of requests
/// and the same summary.
#[test]
fn summary_retry_matches_pi_160() {
    let Some(o) = Oracle::find("summary_retry_matches_pi_160") else {
        return;
    };
    let turns = json!([
        {"match": "<conversation>", "status": 500, "error": "boom"},
        {"match": "<conversation>", "text": "HISTORY"},
        {"match": "# Conversation", "text": "PREFIX"}
    ]);
    let drive = |program: Vec<std::ffi::OsString>| {
        let sb = Sandbox::with_fixtures();
        let (file, _) = cut_before_compaction(sb.fixture_file("compaction-160"));
        let mock = MockLlm::start(&o, sb.root(), &turns);
        mock.configure(&sb.agent());
        retry_settings(&sb.agent(), json!({"baseDelayMs": 5}));
        let events = sb.root().join("events.jsonl");
        let mut c = std::process::Command::new(&o.node22);
        c.arg(repo().join("tests/oracle/rpc-drive.mjs"))
            .arg("--events")
            .arg(&events)
            .arg("--")
            .args(&program)
            .args(["--mode", "rpc", "--session"])
            .arg(&file)
            .env_clear()
            .env("HOME", sb.root().join("home"))
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("PI_CODING_AGENT_DIR", sb.agent())
            .env("PI_OFFLINE", "1")
            .current_dir(sb.cwd())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = c.spawn().unwrap();
        {
            use std::io::Write;
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(br#"[{"type": "compact"}]"#).unwrap();
        }
        let out = child.wait_with_output().unwrap();
        let responses: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|_| panic!("{}{}", stdout(&out), stderr(&out)));
        let recs: Vec<Value> = std::fs::read_to_string(&events)
            .unwrap()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let n = requests(&mock.log).len();
        (responses[0].clone(), recs, n)
    };
    // The records from compaction_start to compaction_end, without the
    // result (its estimate counts each program's own system prompt).
    let span = |recs: &[Value]| -> Vec<Value> {
        let from = recs.iter().position(|r| r["type"] == "compaction_start");
        let to = recs.iter().position(|r| r["type"] == "compaction_end");
        let (Some(from), Some(to)) = (from, to) else {
            panic!("no compaction in {recs:?}")
        };
        recs[from..=to]
            .iter()
            .map(|r| {
                let mut r = r.clone();
                if let Some(m) = r.as_object_mut() {
                    m.remove("result");
                }
                r
            })
            .collect()
    };
    let (pi_resp, pi_recs, pi_n) = drive(vec![o.node22.clone().into(), o.pi160_cli.clone().into()]);
    let (our_resp, our_recs, our_n) = drive(vec![bin("pi-run").into()]);
    assert_eq!(pi_resp["success"], true, "{pi_resp}");
    let pi_span = span(&pi_recs);
    assert!(
        pi_span
            .iter()
            .any(|r| r["type"] == "summarization_retry_scheduled"),
        "{pi_span:?}"
    );
    assert_eq!(span(&our_recs), pi_span);
    assert_eq!(our_resp["success"], true, "{our_resp}");
    assert_eq!(our_resp["data"]["summary"], pi_resp["data"]["summary"]);
    assert_eq!(our_n, pi_n);
    // pi-session compact on the same file and script: the same records.
    let sb = Sandbox::with_fixtures();
    let (file, _) = before_pi_compaction(&sb);
    let mock = MockLlm::start(&o, sb.root(), &turns);
    mock.configure(&sb.agent());
    retry_settings(&sb.agent(), json!({"baseDelayMs": 5}));
    let out = sb.session(&["compact", file.to_str().unwrap(), "--format", "jsonl"]);
    ok(&out);
    assert_eq!(span(&jsonl(&out)), pi_span);
    assert_eq!(requests(&mock.log).len(), pi_n);
}
