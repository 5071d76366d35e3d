//! Built-in subagents: `pi-resources agents` (the switch, the limit and the
//! profiles with their sources), driven as a user drives it.

use crate::common::*;
use serde_json::Value;

pub(crate) fn agents(sb: &Sandbox, args: &[&str]) -> std::process::Output {
    sb.cmd("pi-resources")
        .args(args)
        .arg("--format")
        .arg("jsonl")
        .output()
        .unwrap()
}

fn settings_of(recs: &[Value]) -> &Value {
    recs.iter()
        .find(|r| r["type"] == "subagent_settings")
        .expect("a subagent_settings record")
}

fn settings_file(sb: &Sandbox) -> std::path::PathBuf {
    sb.agent().join("agents/settings.json")
}

#[test]
fn agents_show_enable_disable_and_limit() {
    let sb = Sandbox::new();
    let out = agents(&sb, &["agents"]);
    let recs = jsonl(&out);
    ok(&out);
    let s = settings_of(&recs);
    assert_eq!(s["builtInEnabled"], false);
    assert_eq!(s["maxConcurrent"], 10);
    assert!(
        !settings_file(&sb).exists(),
        "showing never creates the file"
    );

    std::fs::create_dir_all(sb.agent().join("agents")).unwrap();
    std::fs::write(settings_file(&sb), r#"{"futureSetting":"x"}"#).unwrap();
    let out = agents(&sb, &["agents", "--enable", "--max-concurrent", "4"]);
    ok(&out);
    let recs = jsonl(&out);
    let s = settings_of(&recs);
    assert_eq!(s["builtInEnabled"], true);
    assert_eq!(s["maxConcurrent"], 4);
    assert_eq!(
        s["changed"],
        serde_json::json!(["builtInEnabled", "maxConcurrent"])
    );
    assert_eq!(
        std::fs::read_to_string(settings_file(&sb)).unwrap(),
        "{\n  \"futureSetting\": \"x\",\n  \"version\": 1,\n  \"builtInEnabled\": true,\n  \"maxConcurrent\": 4\n}"
    );
    let out = agents(&sb, &["agents", "--disable"]);
    ok(&out);
    assert_eq!(settings_of(&jsonl(&out))["builtInEnabled"], false);
}

#[test]
fn agents_refuses_bad_limits_and_damaged_files_without_writing() {
    let sb = Sandbox::new();
    for bad in ["0", "33", "2.5", "x"] {
        let out = agents(&sb, &["agents", "--max-concurrent", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert!(
            stderr(&out).contains("maxConcurrent must be an integer between 1 and 32"),
            "{}",
            stderr(&out)
        );
        assert!(!settings_file(&sb).exists());
    }
    std::fs::create_dir_all(sb.agent().join("agents")).unwrap();
    for damaged in ["{", "[]", "{\"builtInEnabled\":true} x"] {
        std::fs::write(settings_file(&sb), damaged).unwrap();
        for args in [
            &["agents"][..],
            &["agents", "--enable"],
            &["agents", "--max-concurrent", "3"],
        ] {
            let out = agents(&sb, args);
            assert_eq!(out.status.code(), Some(2), "{damaged} {args:?}");
            let err = stderr(&out);
            assert!(err.contains("settings.json"), "{err}");
            assert_eq!(
                std::fs::read_to_string(settings_file(&sb)).unwrap(),
                damaged
            );
        }
    }
}

#[test]
fn agents_lists_profiles_with_sources_and_project_ones_only_when_trusted() {
    let sb = Sandbox::new();
    let write = |p: std::path::PathBuf, t: &str| {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, t).unwrap();
    };
    write(
        sb.agent().join("agents/explore.md"),
        "---\ndescription: Global explore\ntools: read\n---\nLook.",
    );
    write(sb.cwd().join(".pi/agents/reviewer.md"), "---\ndescription: Review a change\ntools: none\nmodel: p/m\ncustom_key: kept\n---\nReview.");
    write(
        sb.cwd().join(".pi/agents/bad.md"),
        "---\nname: ../escape\n---\n",
    );
    let profiles = |recs: &[Value]| -> Vec<(String, String, bool)> {
        recs.iter()
            .filter(|r| r["type"] == "subagent_profile")
            .map(|r| {
                (
                    r["name"].as_str().unwrap().to_string(),
                    r["scope"].as_str().unwrap().to_string(),
                    r["effective"].as_bool().unwrap(),
                )
            })
            .collect()
    };
    let out = agents(&sb, &["-na", "agents"]);
    ok(&out);
    let recs = jsonl(&out);
    let got = profiles(&recs);
    assert!(
        got.contains(&("explore".into(), "builtin".into(), false)),
        "{got:?}"
    );
    assert!(
        got.contains(&("explore".into(), "global".into(), true)),
        "{got:?}"
    );
    assert!(
        !got.iter().any(|p| p.0 == "reviewer"),
        "untrusted project profile listed: {got:?}"
    );

    let out = agents(&sb, &["-a", "agents"]);
    ok(&out);
    let recs = jsonl(&out);
    let got = profiles(&recs);
    assert!(
        got.contains(&("reviewer".into(), "project".into(), true)),
        "{got:?}"
    );
    let reviewer = recs.iter().find(|r| r["name"] == "reviewer").unwrap();
    assert_eq!(reviewer["tools"], serde_json::json!([]));
    assert_eq!(reviewer["model"], "p/m");
    assert_eq!(reviewer["extra"]["custom_key"], "kept");
    assert!(recs
        .iter()
        .any(|r| r["type"] == "diagnostic" && r["path"].as_str().unwrap().ends_with("bad.md")));
    let shadowed = recs
        .iter()
        .find(|r| r["name"] == "explore" && r["scope"] == "builtin")
        .unwrap();
    assert_eq!(shadowed["shadowedBy"], "global");
}

/// A loopback OpenAI-style server answering by what it is asked: the
/// parent (its request offers `Agent`) delegates on its first request and
/// acknowledges afterwards; a child echoes its task. Records every request
/// body and the most children it saw at once.
pub(crate) struct Mock {
    port: u16,
    pub(crate) requests: std::sync::Arc<std::sync::Mutex<Vec<Value>>>,
    pub(crate) max_children: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

pub(crate) fn has_tool(body: &Value, name: &str) -> bool {
    body["tools"]
        .as_array()
        .is_some_and(|t| t.iter().any(|t| t["function"]["name"] == name))
}

pub(crate) fn last_user_text(body: &Value) -> String {
    let msgs = body["messages"].as_array().cloned().unwrap_or_default();
    let m = msgs.iter().rev().find(|m| m["role"] == "user");
    match m.map(|m| &m["content"]) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

pub(crate) fn first_user_text(body: &Value) -> String {
    let msgs = body["messages"].as_array().cloned().unwrap_or_default();
    match msgs
        .iter()
        .find(|m| m["role"] == "user")
        .map(|m| &m["content"])
    {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The child id the last tool result names (`Subagent <id> …` or
/// `Session ID: <id>.`).
fn last_child_id(body: &Value) -> String {
    let msgs = body["messages"].as_array().cloned().unwrap_or_default();
    let Some(m) = msgs.iter().rev().find(|m| m["role"] == "tool") else {
        return String::new();
    };
    let text = match &m["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    };
    if let Some(i) = text.find("Session ID: ") {
        let rest = &text[i + 12..];
        return rest.split(['.', ' ']).next().unwrap_or("").to_string();
    }
    text.strip_prefix("Subagent ")
        .and_then(|r| r.split(' ').next())
        .unwrap_or("")
        .to_string()
}

impl Mock {
    pub(crate) fn start(parent_calls: Vec<(&'static str, String)>) -> Mock {
        Mock::start_with(parent_calls, None)
    }

    /// `remove_on_first`: a file deleted when the parent's first request
    /// arrives (the switch turned off mid-run).
    pub(crate) fn start_with(
        parent_calls: Vec<(&'static str, String)>,
        remove_on_first: Option<std::path::PathBuf>,
    ) -> Mock {
        Mock::start_steps(vec![parent_calls], remove_on_first)
    }

    /// The parent's answer to its n-th request (n = the assistant messages
    /// it already has) calls `steps[n]`; `$ID` in the arguments becomes the
    /// child id the last tool result named. A child whose task says `LOOP`
    /// answers "working" and calls `ls` every time; one whose task says
    /// `DIRTY` first writes `new.txt`, `BASH` first runs `rm -rf gone;
    /// touch child-ran.txt`, `READ` first reads `secret.txt`.
    pub(crate) fn start_steps(
        steps: Vec<Vec<(&'static str, String)>>,
        remove_on_first: Option<std::path::PathBuf>,
    ) -> Mock {
        use std::io::{BufRead, BufReader, Read, Write};
        use std::sync::atomic::{AtomicUsize, Ordering};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let max_children = std::sync::Arc::new(AtomicUsize::new(0));
        let active = std::sync::Arc::new(AtomicUsize::new(0));
        let (reqs, maxc) = (requests.clone(), max_children.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let (reqs, maxc, active) = (reqs.clone(), maxc.clone(), active.clone());
                let steps = steps.clone();
                let remove = remove_on_first.clone();
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    let mut len = 0usize;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            break;
                        }
                        let l = line.trim_end().to_ascii_lowercase();
                        if l.is_empty() {
                            break;
                        }
                        if let Some(v) = l.strip_prefix("content-length:") {
                            len = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0u8; len];
                    let _ = reader.read_exact(&mut body);
                    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    let parent = has_tool(&body, "Agent");
                    let msgs = body["messages"].as_array().cloned().unwrap_or_default();
                    let step = msgs.iter().filter(|m| m["role"] == "assistant").count();
                    let first = parent && step == 0;
                    reqs.lock().unwrap().push(body.clone());
                    if first {
                        if let Some(f) = &remove {
                            let _ = std::fs::remove_file(f);
                        }
                    }
                    let calls = steps.get(step).cloned().unwrap_or_default();
                    let sse = if parent && !calls.is_empty() {
                        let id = last_child_id(&body);
                        let c: Vec<(&str, String)> = calls
                            .iter()
                            .map(|(n, a)| (*n, a.replace("$ID", &id)))
                            .collect();
                        let c: Vec<(&str, &str)> =
                            c.iter().map(|(n, a)| (*n, a.as_str())).collect();
                        sse_tools(&c)
                    } else if parent {
                        sse_text("ack")
                    } else {
                        let now = active.fetch_add(1, Ordering::SeqCst) + 1;
                        maxc.fetch_max(now, Ordering::SeqCst);
                        // Long enough for parallel children to overlap.
                        std::thread::sleep(std::time::Duration::from_millis(150));
                        active.fetch_sub(1, Ordering::SeqCst);
                        let task = first_user_text(&body);
                        let child_steps = msgs.iter().filter(|m| m["role"] == "assistant").count();
                        if task.contains("LOOP") {
                            let t = sse_tools(&[("ls", "{}")]);
                            let chunk = serde_json::json!({"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1, "model": "mock-model",
                                "choices": [{"index": 0, "delta": {"content": "working"}, "finish_reason": null}]});
                            let cut = t.find("\n\n").map_or(0, |i| i + 2);
                            format!("{}data: {chunk}\n\n{}", &t[..cut], &t[cut..])
                        } else if task.contains("DIRTY") && child_steps == 0 {
                            sse_tools(&[("write", r#"{"path":"new.txt","content":"x"}"#)])
                        } else if task.contains("BASH") && child_steps == 0 {
                            sse_tools(&[(
                                "bash",
                                r#"{"command":"rm -rf gone; touch child-ran.txt"}"#,
                            )])
                        } else if task.contains("READ") && child_steps == 0 {
                            sse_tools(&[("read", r#"{"path":"secret.txt"}"#)])
                        } else {
                            let task = last_user_text(&body);
                            sse_text(&format!(
                                "child says: {}",
                                task.lines().next().unwrap_or("")
                            ))
                        }
                    };
                    let _ = stream.write_all(
                        format!("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n{sse}").as_bytes(),
                    );
                    let _ = stream.flush();
                    let _ = stream.shutdown(std::net::Shutdown::Both);
                });
            }
        });
        Mock {
            port,
            requests,
            max_children,
        }
    }

    pub(crate) fn configure(&self, agent: &std::path::Path) {
        ScriptServer {
            port: self.port,
            requests: Default::default(),
        }
        .configure(agent);
    }
}

pub(crate) fn read_jsonl(p: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

pub(crate) fn session_files(sb: &Sandbox) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for d in std::fs::read_dir(sb.agent().join("sessions"))
        .unwrap()
        .flatten()
    {
        if d.path().is_dir() {
            for f in std::fs::read_dir(d.path()).unwrap().flatten() {
                out.push(f.path());
            }
        }
    }
    out
}

pub(crate) fn agent_call(args: Value) -> (&'static str, String) {
    ("Agent", args.to_string())
}

pub(crate) fn enable(sb: &Sandbox, max: u32) {
    ok(&agents(
        sb,
        &["agents", "--enable", "--max-concurrent", &max.to_string()],
    ));
}

#[test]
fn parent_delegates_foreground_and_two_background_children() {
    let sb = Sandbox::new();
    let mock = Mock::start(vec![
        agent_call(
            serde_json::json!({"subagent_type": "explore", "prompt": "FG task", "description": "Foreground"}),
        ),
        agent_call(
            serde_json::json!({"prompt": "BG one", "description": "Background one", "run_in_background": true}),
        ),
        agent_call(
            serde_json::json!({"prompt": "BG two", "description": "Background two", "run_in_background": true}),
        ),
    ]);
    mock.configure(&sb.agent());
    enable(&sb, 1);
    let out = sb
        .cmd("pi-run")
        .args(["-p", "delegate please"])
        .output()
        .unwrap();
    ok(&out);
    // One child at a time (maxConcurrent 1).
    assert_eq!(
        mock.max_children.load(std::sync::atomic::Ordering::SeqCst),
        1
    );

    let files = session_files(&sb);
    assert_eq!(files.len(), 4, "{files:?}");
    let (parents, children): (Vec<_>, Vec<_>) = files
        .iter()
        .partition(|f| read_jsonl(f)[0].get("parentSession").is_none());
    assert_eq!(parents.len(), 1);
    let parent = parents[0];
    let parent_entries = read_jsonl(parent);
    let parent_id = parent_entries[0]["id"].as_str().unwrap().to_string();
    let mut ids = Vec::new();
    for c in &children {
        let e = read_jsonl(c);
        assert_eq!(e[0]["parentSession"], parent.display().to_string());
        assert_eq!(e[1]["type"], "custom");
        assert_eq!(e[1]["customType"], "pi-web:subagent");
        let meta = &e[1]["data"];
        let keys: Vec<&str> = meta
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "version",
                "parentSessionId",
                "parentSessionPath",
                "parentToolCallId",
                "profile",
                "description",
                "task",
                "runInBackground",
                "createdAt",
                "resourceSnapshot"
            ]
        );
        assert_eq!(meta["parentSessionId"], parent_id.as_str());
        assert_eq!(e[2]["type"], "session_info");
        // pi-web's `{version, status}`, then the process running the child
        // (our addition, which pi-web does not read).
        for (i, status) in [(3, "queued"), (4, "running")] {
            let data = e[i]["data"].as_object().unwrap();
            let keys: Vec<&str> = data.keys().map(String::as_str).collect();
            assert_eq!(keys, ["version", "status", "pid", "host"]);
            assert_eq!(
                (&data["version"], &data["status"]),
                (&serde_json::json!(1), &serde_json::json!(status))
            );
            assert!(data["pid"].as_u64().is_some_and(|p| p > 0));
        }
        let result = e
            .iter()
            .find(|x| x["customType"] == "pi-web:subagent-result")
            .unwrap();
        assert_eq!(result["data"]["status"], "completed");
        let task = meta["task"].as_str().unwrap();
        assert_eq!(result["data"]["result"], format!("child says: {task}"));
        if task == "FG task" {
            assert_eq!(meta["profile"], "explore");
            assert_eq!(meta["runInBackground"], false);
            assert_eq!(
                meta["resourceSnapshot"]["tools"],
                serde_json::json!(["read", "grep", "find", "ls"])
            );
        } else {
            assert_eq!(meta["profile"], "general-purpose");
            assert_eq!(meta["runInBackground"], true);
        }
        ids.push((task.to_string(), e[0]["id"].as_str().unwrap().to_string()));
    }
    ids.sort();
    let id_of = |t: &str| ids.iter().find(|(k, _)| k == t).unwrap().1.clone();

    let tool_results: Vec<&Value> = parent_entries
        .iter()
        .filter(|e| e["message"]["role"] == "toolResult")
        .collect();
    assert_eq!(tool_results.len(), 3);
    let text = |e: &Value| {
        e["message"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        text(tool_results[0]),
        format!(
            "Subagent {} completed.\n\nchild says: FG task",
            id_of("FG task")
        )
    );
    assert_eq!(
        tool_results[0]["message"]["details"]["kind"],
        "pi-web-subagent"
    );
    for (i, t) in [(1, "BG one"), (2, "BG two")] {
        assert_eq!(
            text(tool_results[i]),
            format!("Subagent started in background. Session ID: {}. You will be notified when it completes.", id_of(t))
        );
    }
    let notes: Vec<&Value> = parent_entries
        .iter()
        .filter(|e| {
            e["type"] == "custom_message" && e["customType"] == "pi-web:subagent-notification"
        })
        .collect();
    assert_eq!(notes.len(), 2, "{parent_entries:#?}");
    for n in notes {
        let c = match &n["content"] {
            Value::String(s) => s.clone(),
            v => v[0]["text"].as_str().unwrap().to_string(),
        };
        assert!(c.starts_with("The following is a background subagent's report delivered by Pi Web, not a message from the user."), "{c}");
        assert!(c.contains("completed.\n\nchild says: BG "), "{c}");
    }

    // pi-session agents lists the three runs of the parent.
    let out = sb
        .cmd("pi-session")
        .args(["agents", parent.to_str().unwrap(), "--format", "jsonl"])
        .output()
        .unwrap();
    ok(&out);
    let runs = jsonl(&out);
    assert_eq!(runs.len(), 3, "{runs:?}");
    for r in &runs {
        assert_eq!(r["type"], "subagent_run");
        assert_eq!(r["status"], "completed");
        assert!(r["durationMs"].as_i64().is_some_and(|d| d >= 0));
        assert!(r["totalTokens"].as_u64().is_some_and(|t| t > 0), "{r}");
        assert!(r["cost"].as_f64().is_some_and(|c| c > 0.0), "{r}");
    }
    let mut profiles: Vec<&str> = runs
        .iter()
        .map(|r| r["profile"].as_str().unwrap())
        .collect();
    profiles.sort();
    assert_eq!(profiles, ["explore", "general-purpose", "general-purpose"]);
    let out = sb
        .cmd("pi-session")
        .args(["agents", children[0].to_str().unwrap(), "--format", "jsonl"])
        .output()
        .unwrap();
    assert!(jsonl(&out).is_empty(), "a child has no children");

    // The real pi opens the parent and every child.
    if let Some(o) = Oracle::find("parent_delegates_foreground_and_two_background_children") {
        for f in &files {
            let html = sb.root().join("export.html");
            let out = o
                .pi160(&sb)
                .args(["--export", f.to_str().unwrap(), html.to_str().unwrap()])
                .output()
                .unwrap();
            assert!(out.status.success(), "{}: {}", f.display(), stderr(&out));
            assert!(html.is_file());
        }
    }
}

#[test]
fn switch_off_registers_nothing_and_chat_only_child_gets_exactly_its_prompt() {
    let sb = Sandbox::new();
    let mock = Mock::start(vec![agent_call(
        serde_json::json!({"subagent_type": "chat", "prompt": "Say hi", "description": "Chat"}),
    )]);
    mock.configure(&sb.agent());
    std::fs::create_dir_all(sb.agent().join("agents")).unwrap();
    std::fs::write(
        sb.agent().join("agents/chat.md"),
        "---\ndescription: Chat only\ntools: none\n---\nYou are a terse chat partner.\n",
    )
    .unwrap();
    // A context file and a skill that a Chat-only child must not see.
    std::fs::write(sb.cwd().join("AGENTS.md"), "CONTEXT-MARKER").unwrap();
    std::fs::create_dir_all(sb.agent().join("skills/marker")).unwrap();
    std::fs::write(
        sb.agent().join("skills/marker/SKILL.md"),
        "---\nname: marker\ndescription: SKILL-MARKER\n---\nx",
    )
    .unwrap();

    // Off: no control tool is offered.
    ok(&sb.cmd("pi-run").args(["-p", "hello"]).output().unwrap());
    let first = mock.requests.lock().unwrap()[0].clone();
    assert!(!has_tool(&first, "Agent") && has_tool(&first, "read"));
    mock.requests.lock().unwrap().clear();

    enable(&sb, 10);
    ok(&sb.cmd("pi-run").args(["-p", "delegate"]).output().unwrap());
    let reqs = mock.requests.lock().unwrap().clone();
    let parent = &reqs[0];
    for name in pi_names() {
        assert!(has_tool(parent, name), "{name}");
    }
    // The hidden inline extension's tools come last, in registration
    // order, in the request and in the recorded system message.
    let names = tool_names(parent);
    assert_eq!(names[names.len() - 3..], pi_names(), "{names:?}");
    let recorded: Vec<String> = session_files(&sb)
        .iter()
        .flat_map(|f| read_jsonl(f))
        .filter(|e| e["message"]["role"] == "system")
        .filter_map(|e| e["message"]["toolsAdded"].as_array().cloned())
        .map(|t| {
            t.iter()
                .map(|t| t["name"].as_str().unwrap_or("").to_string())
                .collect::<Vec<_>>()
        })
        .find(|t| t.iter().any(|n| n == "Agent"))
        .expect("a system message adding Agent");
    assert_eq!(recorded, names);
    // Hidden: no listing names it.
    let out = sb
        .cmd("pi-resources")
        .args(["--format", "jsonl"])
        .output()
        .unwrap();
    ok(&out);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("pi-web-subagents"));
    let child = reqs
        .iter()
        .find(|r| !has_tool(r, "Agent"))
        .expect("a child request");
    assert!(
        child
            .get("tools")
            .is_none_or(|t| t.as_array().is_none_or(|a| a.is_empty())),
        "{child}"
    );
    let msgs = child["messages"].as_array().unwrap();
    let system: Vec<&Value> = msgs
        .iter()
        .filter(|m| m["role"] == "system" || m["role"] == "developer")
        .collect();
    assert_eq!(system.len(), 1, "{child}");
    assert_eq!(system[0]["content"], "You are a terse chat partner.");
    let all = child.to_string();
    assert!(!all.contains("CONTEXT-MARKER") && !all.contains("SKILL-MARKER"));
    assert_eq!(last_user_text(child), "Say hi");
}

fn pi_names() -> [&'static str; 3] {
    ["Agent", "get_subagent_result", "steer_subagent"]
}

#[test]
fn stale_and_invalid_agent_calls_are_refused_with_the_reference_texts() {
    let sb = Sandbox::new();
    let mock = Mock::start(vec![
        agent_call(serde_json::json!({"subagent_type": "nope", "prompt": "x", "description": "d"})),
        agent_call(
            serde_json::json!({"prompt": "x", "description": "d", "input_files": ["../secret.txt"]}),
        ),
        (
            "get_subagent_result",
            serde_json::json!({"agent_id": "missing"}).to_string(),
        ),
        (
            "steer_subagent",
            serde_json::json!({"agent_id": "missing", "message": "go"}).to_string(),
        ),
    ]);
    mock.configure(&sb.agent());
    std::fs::write(sb.root().join("secret.txt"), "s").unwrap();
    enable(&sb, 2);
    ok(&sb.cmd("pi-run").args(["-p", "go"]).output().unwrap());
    let file = session_files(&sb).pop().unwrap();
    let texts: Vec<String> = read_jsonl(&file)
        .iter()
        .filter(|e| e["message"]["role"] == "toolResult")
        .map(|e| {
            assert_eq!(e["message"]["isError"], true);
            e["message"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        texts,
        [
            "Unknown or disabled subagent profile: nope",
            "Agent input file is outside the session cwd: ../secret.txt",
            "Subagent not found: missing",
            "Subagent is not running",
        ]
    );
}

#[test]
fn a_stale_agent_call_after_the_switch_went_off_is_refused() {
    let sb = Sandbox::new();
    let mock = Mock::start_with(
        vec![agent_call(
            serde_json::json!({"prompt": "x", "description": "d"}),
        )],
        Some(settings_file(&sb)),
    );
    mock.configure(&sb.agent());
    enable(&sb, 2);
    ok(&sb.cmd("pi-run").args(["-p", "go"]).output().unwrap());
    let files = session_files(&sb);
    assert_eq!(files.len(), 1, "no child was started: {files:?}");
    let result = read_jsonl(&files[0])
        .into_iter()
        .find(|e| e["message"]["role"] == "toolResult")
        .unwrap();
    assert_eq!(result["message"]["isError"], true);
    assert_eq!(
        result["message"]["content"][0]["text"],
        "Pi Web built-in sub-agents are disabled"
    );
}

/// The real `@tintinweb/pi-subagents` (tests/ext-node/install.sh) is
/// suppressed while the built-in is on and active when it is off; a
/// look-alike extension registering `Agent` is never suppressed.
#[test]
fn legacy_pi_subagents_is_suppressed_only_while_the_built_in_is_on() {
    let Some(o) = Oracle::find("legacy_pi_subagents_is_suppressed_only_while_the_built_in_is_on")
    else {
        return;
    };
    let cache = std::env::var_os("PI_EXT_CACHE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/pi-toolkit-ext")
        });
    let legacy = cache.join("tintinweb-subagents/node_modules/@tintinweb/pi-subagents");
    if !legacy.join("package.json").is_file() {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!(
                "@tintinweb/pi-subagents is not installed under {} (tests/ext-node/install.sh)",
                cache.display()
            );
        }
        eprintln!("SKIP legacy_pi_subagents_is_suppressed_only_while_the_built_in_is_on: run tests/ext-node/install.sh");
        return;
    }
    let ours = "Delegate a focused task to a configured subagent.";
    let run = |on: bool, ext: &std::path::Path| -> (Value, String) {
        let sb = Sandbox::new();
        let mock = Mock::start(vec![]);
        mock.configure(&sb.agent());
        if on {
            enable(&sb, 4);
        }
        let out = sb
            .cmd("pi-run")
            .env("PI_NODE", &o.node22)
            .args(["--extension-timeout", "20", "-e"])
            .arg(ext)
            .args(["-p", "hi"])
            .output()
            .unwrap();
        ok(&out);
        let first = mock.requests.lock().unwrap()[0].clone();
        (first, stderr(&out))
    };
    let agents_of = |body: &Value| -> Vec<String> {
        body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["function"]["name"] == "Agent")
            .map(|t| t["function"]["description"].as_str().unwrap().to_string())
            .collect()
    };
    // On: only the built-in's tools, no collision reported.
    let (body, err) = run(true, &legacy);
    let a = agents_of(&body);
    assert_eq!(a.len(), 1);
    assert!(a[0].starts_with(ours), "{}", a[0]);
    assert!(!err.contains("conflicts"), "{err}");
    for name in pi_names() {
        assert_eq!(
            body["tools"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|t| t["function"]["name"] == name)
                .count(),
            1,
            "{name}"
        );
    }
    // Off: the legacy extension is left alone.
    let (body, _) = run(false, &legacy);
    let a = agents_of(&body);
    assert_eq!(a.len(), 1);
    assert!(!a[0].starts_with(ours), "{}", a[0]);
    // A look-alike is kept, and its collision is reported.
    let dir = tempfile::tempdir().unwrap();
    let look = dir.path().join("unrelated/index.ts");
    std::fs::create_dir_all(look.parent().unwrap()).unwrap();
    std::fs::write(
        &look,
        "export default function (pi) {\n  pi.registerTool({ name: \"Agent\", label: \"Agent\", description: \"LOOKALIKE agent\", parameters: { type: \"object\", properties: {} }, async execute() { return { content: [{ type: \"text\", text: \"look\" }] }; } });\n}\n",
    )
    .unwrap();
    let (body, err) = run(true, &look);
    assert_eq!(agents_of(&body), ["LOOKALIKE agent"]);
    // The built-in is the inline extension loaded after the file ones: the
    // conflict is reported on it, naming the first owner, as pi does.
    assert!(
        err.contains(&format!(
            "pi-run: extension <inline:pi-web-subagents>: Tool \"Agent\" conflicts with {}; skipped",
            look.display()
        )),
        "{err}"
    );
    let names = tool_names(&body);
    assert_eq!(
        names[names.len() - 3..],
        ["Agent", "get_subagent_result", "steer_subagent"],
        "the built-in's tools follow the file extension's: {names:?}"
    );
}

pub(crate) fn tool_result_texts(entries: &[Value]) -> Vec<(String, bool)> {
    entries
        .iter()
        .filter(|e| e["message"]["role"] == "toolResult")
        .map(|e| {
            (
                e["message"]["content"][0]["text"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                e["message"]["isError"] == true,
            )
        })
        .collect()
}

pub(crate) fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| t["function"]["name"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) fn parent_and_children(sb: &Sandbox) -> (std::path::PathBuf, Vec<std::path::PathBuf>) {
    let (parents, children): (Vec<_>, Vec<_>) = session_files(sb)
        .into_iter()
        .partition(|f| read_jsonl(f)[0].get("parentSession").is_none());
    assert_eq!(parents.len(), 1, "{parents:?}");
    (parents[0].clone(), children)
}

/// `resume` continues the same child file with its snapshot's tools; a
/// `running` record left by a killed parent reads as interrupted and can be
/// resumed; an invalid snapshot leaves a normal session (pi-web's rule);
/// `model` cannot change on resume.
/// pi-web drops a background report whose result was read while the
/// parent was busy (reference 5.8): `get_subagent_result` with `wait`
/// reads it, and no notification follows, although the child ended while
/// the parent's tool call was running (its report was queued already).
#[test]
fn a_background_result_read_with_wait_is_not_notified_again() {
    let sb = Sandbox::new();
    let mock = Mock::start_steps(
        vec![
            vec![agent_call(
                serde_json::json!({"prompt": "BG task", "description": "Background", "run_in_background": true}),
            )],
            vec![(
                "get_subagent_result",
                r#"{"agent_id": "$ID", "wait": true}"#.to_string(),
            )],
        ],
        None,
    );
    mock.configure(&sb.agent());
    enable(&sb, 4);
    ok(&sb.cmd("pi-run").args(["-p", "delegate"]).output().unwrap());
    let (parent, children) = parent_and_children(&sb);
    assert_eq!(children.len(), 1, "{children:?}");
    let id = read_jsonl(&children[0])[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let entries = read_jsonl(&parent);
    let texts = tool_result_texts(&entries);
    assert_eq!(
        texts[1],
        (
            format!("Subagent {id} completed.\n\nchild says: BG task"),
            false
        )
    );
    let notes = entries
        .iter()
        .filter(|e| e["customType"] == "pi-web:subagent-notification")
        .count();
    assert_eq!(notes, 0, "{entries:#?}");
    // Parent requests: the start, the wait, the last answer; nothing for a
    // report.
    let reqs = mock.requests.lock().unwrap().clone();
    assert_eq!(reqs.iter().filter(|r| has_tool(r, "Agent")).count(), 3);
}

#[test]
fn resume_continues_the_child_and_a_dead_running_child_reads_as_interrupted() {
    let sb = Sandbox::new();
    let call = |v: Value| agent_call(v);
    let mock = Mock::start_steps(
        vec![
            vec![call(
                serde_json::json!({"subagent_type": "explore", "prompt": "first task", "description": "Look"}),
            )],
            vec![call(
                serde_json::json!({"resume": "$ID", "prompt": "continue this", "description": ""}),
            )],
        ],
        None,
    );
    mock.configure(&sb.agent());
    enable(&sb, 4);
    ok(&sb.cmd("pi-run").args(["-p", "delegate"]).output().unwrap());
    let (parent, children) = parent_and_children(&sb);
    assert_eq!(children.len(), 1, "resume reuses the child: {children:?}");
    let child = &children[0];
    let entries = read_jsonl(child);
    let id = entries[0]["id"].as_str().unwrap().to_string();
    let texts = tool_result_texts(&read_jsonl(&parent));
    assert_eq!(
        texts[1],
        (
            format!("Subagent {id} completed.\n\nchild says: continue this"),
            false
        )
    );
    let kinds: Vec<String> = entries
        .iter()
        .filter(|e| e["type"] == "custom")
        .map(|e| {
            format!(
                "{}:{}",
                e["customType"].as_str().unwrap(),
                e["data"]["status"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "pi-web:subagent:",
            "pi-web:subagent-status:queued",
            "pi-web:subagent-status:running",
            "pi-web:subagent-result:completed",
            "pi-web:subagent-status:queued",
            "pi-web:subagent-status:running",
            "pi-web:subagent-result:completed",
        ]
    );
    let reqs = mock.requests.lock().unwrap().clone();
    let child_reqs: Vec<&Value> = reqs.iter().filter(|r| !has_tool(r, "Agent")).collect();
    assert_eq!(child_reqs.len(), 2);
    assert_eq!(tool_names(child_reqs[1]), ["read", "grep", "find", "ls"]);
    assert_eq!(last_user_text(child_reqs[1]), "continue this");
    assert!(
        child_reqs[1].to_string().contains("child says: first task"),
        "the resumed child keeps its conversation"
    );

    // Listings mark the family: `ls` names the child's parent, the
    // parent's tree marks the entries naming the child.
    let parent_id = read_jsonl(&parent)[0]["id"].as_str().unwrap().to_string();
    let out = sb
        .cmd("pi-session")
        .args(["ls", "--format", "jsonl"])
        .output()
        .unwrap();
    ok(&out);
    let recs = jsonl(&out);
    let child_rec = recs.iter().find(|r| r["id"] == id.as_str()).unwrap();
    assert_eq!(child_rec["subagentOf"], parent_id.as_str());
    let parent_rec = recs.iter().find(|r| r["id"] == parent_id.as_str()).unwrap();
    assert!(parent_rec.get("subagentOf").is_none());
    let out = sb
        .cmd("pi-session")
        .args(["ls", "--format", "text"])
        .env("COLUMNS", "160")
        .output()
        .unwrap();
    ok(&out);
    // The mark names the parent by a prefix long enough to be unique
    // (at least 8 characters).
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let mark = text
        .split("[subagent of ")
        .nth(1)
        .and_then(|r| r.split(']').next())
        .unwrap_or("");
    assert!(mark.len() >= 8 && parent_id.starts_with(mark), "{text}");
    let out = sb
        .cmd("pi-session")
        .args(["tree", parent.to_str().unwrap(), "--format", "jsonl"])
        .output()
        .unwrap();
    ok(&out);
    let marked: Vec<Value> = jsonl(&out)
        .into_iter()
        .filter(|r| r.get("subagent").is_some())
        .collect();
    assert_eq!(marked.len(), 2, "both Agent results name the child");
    assert!(marked
        .iter()
        .all(|r| r["subagent"] == id.as_str() && r["role"] == "toolResult"));
    let out = sb
        .cmd("pi-session")
        .args(["tree", parent.to_str().unwrap(), "--format", "text"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("⇢ subagent {id}")));

    // The parent was killed while the child ran: its last record is
    // `running`. The snapshot is damaged (a control tool in it).
    let mut lines: Vec<Value> = read_jsonl(child);
    lines[1]["data"]["resourceSnapshot"]["tools"] = serde_json::json!(["read", "Agent"]);
    let last = lines.last().unwrap()["id"].as_str().unwrap().to_string();
    lines.push(
        serde_json::json!({"type": "custom", "id": "deadbeef", "parentId": last,
        "timestamp": "2026-01-01T00:00:00.000Z", "customType": "pi-web:subagent-status",
        "data": {"version": 1, "status": "running"}}),
    );
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(child, text).unwrap();

    let mock2 = Mock::start_steps(
        vec![
            vec![],
            vec![],
            vec![],
            vec![(
                "get_subagent_result",
                serde_json::json!({"agent_id": id}).to_string(),
            )],
            vec![call(
                serde_json::json!({"resume": id, "prompt": "again", "description": "Again"}),
            )],
            vec![
                call(
                    serde_json::json!({"resume": id, "prompt": "x", "description": "d", "model": "mock/mock-model"}),
                ),
                call(serde_json::json!({"resume": "nope", "prompt": "x", "description": "d"})),
            ],
        ],
        None,
    );
    mock2.configure(&sb.agent());
    ok(&sb
        .cmd("pi-run")
        .args(["--session", parent.to_str().unwrap(), "-p", "check"])
        .output()
        .unwrap());
    let texts = tool_result_texts(&read_jsonl(&parent));
    assert_eq!(
        &texts[2..],
        [
            (
                format!("Subagent {id} was interrupted before completion."),
                false
            ),
            (
                format!("Subagent {id} completed.\n\nchild says: again"),
                false
            ),
            (
                "Agent resume keeps the subagent's model; model cannot be given".into(),
                true
            ),
            ("Subagent not found: nope".into(), true),
        ]
    );
    let reqs = mock2.requests.lock().unwrap().clone();
    let child_req = reqs.iter().find(|r| !has_tool(r, "Agent")).unwrap();
    // The invalid snapshot: a normal session's default tools.
    assert_eq!(tool_names(child_req), ["read", "bash", "edit", "write"]);
    let e = read_jsonl(child);
    let result = e.last().unwrap();
    assert_eq!(result["customType"], "pi-web:subagent-result");
    assert_eq!(result["data"]["status"], "completed");
    assert_eq!(e[0]["id"], id.as_str());
}

/// `max_turns` is two-phase: after N turns the child is told to wrap up,
/// after one more it is stopped, and the run is completed
/// (`wrappedAtTurnLimit`) with its last text. `inherit_context` puts the
/// parent's context into the child's system prompt; `model` picks another
/// model of the registry.
#[test]
fn turn_limit_inherited_context_and_model_override() {
    let sb = Sandbox::new();
    let mock = Mock::start(vec![
        agent_call(
            serde_json::json!({"prompt": "LOOP forever", "description": "Loop", "max_turns": 2}),
        ),
        agent_call(
            serde_json::json!({"prompt": "with context", "description": "Ctx", "inherit_context": true, "model": "other-model"}),
        ),
        agent_call(
            serde_json::json!({"prompt": "x", "description": "Bad", "model": "nowhere/none"}),
        ),
    ]);
    mock.configure(&sb.agent());
    let models = serde_json::json!({"providers": {"mock": {
        "baseUrl": format!("http://127.0.0.1:{}/v1", mock.port),
        "api": "openai-completions", "apiKey": "test",
        "models": [
            {"id": "mock-model", "name": "Mock", "reasoning": false, "input": ["text"],
             "contextWindow": 128000, "maxTokens": 4096},
            {"id": "other-model", "name": "Other", "reasoning": false, "input": ["text"],
             "contextWindow": 128000, "maxTokens": 4096}]
    }}});
    std::fs::write(sb.agent().join("models.json"), models.to_string()).unwrap();
    enable(&sb, 1);
    ok(&sb
        .cmd("pi-run")
        .args(["-p", "PARENT-MARKER question"])
        .output()
        .unwrap());
    let (parent, children) = parent_and_children(&sb);
    let texts = tool_result_texts(&read_jsonl(&parent));
    assert_eq!(
        texts[2],
        ("Subagent model not found: nowhere/none".into(), true)
    );
    let reqs = mock.requests.lock().unwrap().clone();
    let loop_reqs: Vec<&Value> = reqs
        .iter()
        .filter(|r| !has_tool(r, "Agent") && first_user_text(r).contains("LOOP"))
        .collect();
    // Turn 1, turn 2 (then the wrap-up steer), turn 3 (then the abort).
    assert_eq!(loop_reqs.len(), 3);
    assert_eq!(
        last_user_text(loop_reqs[2]),
        "You have reached your turn limit. Wrap up immediately and provide your final answer now."
    );
    let loop_child = children
        .iter()
        .find(|c| read_jsonl(c)[1]["data"]["task"] == "LOOP forever")
        .unwrap();
    let result = read_jsonl(loop_child)
        .into_iter()
        .find(|e| e["customType"] == "pi-web:subagent-result")
        .unwrap();
    assert_eq!(result["data"]["status"], "completed", "{result}");
    assert_eq!(result["data"]["wrappedAtTurnLimit"], true);
    assert_eq!(result["data"]["result"], "working");
    assert!(texts[0].0.ends_with("completed.\n\nworking"), "{texts:?}");

    let ctx_req = reqs
        .iter()
        .find(|r| !has_tool(r, "Agent") && first_user_text(r) == "with context")
        .unwrap();
    assert_eq!(ctx_req["model"], "other-model");
    let system = ctx_req["messages"][0]["content"].as_str().unwrap_or("");
    assert!(system.contains("The following is the active conversation context from the parent session. Use it only as background for the delegated task:\n["), "{system}");
    assert!(system.contains("PARENT-MARKER question"), "{system}");
}

/// `isolation: "worktree"`: the child runs in a fresh worktree of the
/// parent's repository on branch `pi-web-agent-<uuid>`; a clean one is
/// removed afterwards with its branch (it holds nothing new; the result
/// says `worktreeBranchRemoved`), a dirty one is kept with its branch and
/// the reason recorded as `worktreeCleanupError`.
#[test]
fn worktree_isolation_creates_removes_and_keeps_a_dirty_tree() {
    let sb = Sandbox::new();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(sb.cwd())
            .args(args)
            .output();
        match out {
            Ok(o) if o.status.success() => Some(String::from_utf8_lossy(&o.stdout).to_string()),
            _ => None,
        }
    };
    if git(&["init", "-q"]).is_none() {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("git is required");
        }
        eprintln!("SKIP worktree_isolation: git is not available");
        return;
    }
    std::fs::write(sb.cwd().join("tracked.txt"), "t").unwrap();
    git(&["add", "tracked.txt"]).unwrap();
    git(&[
        "-c",
        "user.email=t@t",
        "-c",
        "user.name=t",
        "commit",
        "-qm",
        "init",
    ])
    .unwrap();
    let mock = Mock::start(vec![
        agent_call(
            serde_json::json!({"prompt": "clean work", "description": "Clean", "isolation": "worktree"}),
        ),
        agent_call(
            serde_json::json!({"prompt": "DIRTY work", "description": "Dirty", "isolation": "worktree"}),
        ),
        agent_call(
            serde_json::json!({"prompt": "not isolated", "description": "Plain", "isolation": "elsewhere"}),
        ),
    ]);
    mock.configure(&sb.agent());
    enable(&sb, 1);
    let out = sb.cmd("pi-run").args(["-p", "go"]).output().unwrap();
    ok(&out);
    let (parent, children) = parent_and_children(&sb);
    assert_eq!(
        children.len(),
        3,
        "tool results: {:?}\nstderr: {}",
        read_jsonl(&parent)
            .iter()
            .filter(|e| e["message"]["role"] == "toolResult")
            .map(|e| e["message"]["content"].to_string())
            .collect::<Vec<_>>(),
        String::from_utf8_lossy(&out.stderr)
    );
    let root = std::fs::canonicalize(sb.cwd()).unwrap();
    let base = root.with_file_name(format!(
        "{}-worktrees",
        root.file_name().unwrap().to_string_lossy()
    ));
    let by_task = |t: &str| {
        let c = children
            .iter()
            .find(|c| read_jsonl(c)[1]["data"]["task"] == t)
            .unwrap();
        read_jsonl(c)
    };
    let results = read_jsonl(&parent)
        .into_iter()
        .filter(|e| e["message"]["role"] == "toolResult")
        .collect::<Vec<_>>();
    for (i, task) in ["clean work", "DIRTY work"].iter().enumerate() {
        let e = by_task(task);
        let meta = &e[1]["data"];
        let path = meta["worktreePath"].as_str().unwrap();
        let branch = meta["worktreeBranch"].as_str().unwrap();
        assert!(branch.starts_with("pi-web-agent-"), "{branch}");
        assert_eq!(std::path::Path::new(path), base.join(branch));
        assert_eq!(e[0]["cwd"], path, "the child's cwd is the worktree");
        let has_branch = git(&["show-ref", "--verify", &format!("refs/heads/{branch}")]).is_some();
        let result = e
            .iter()
            .find(|x| x["customType"] == "pi-web:subagent-result")
            .unwrap();
        let details = &results[i]["message"]["details"];
        assert_eq!(details["worktreePath"], path);
        assert_eq!(details["worktreeBranch"], branch);
        if i == 0 {
            assert!(
                !std::path::Path::new(path).exists(),
                "a clean worktree is removed"
            );
            assert!(result["data"].get("worktreeCleanupError").is_none());
            assert!(!has_branch, "the branch of a removed tree is deleted");
            assert_eq!(result["data"]["worktreeBranchRemoved"], true);
            assert_eq!(details["worktreeBranchRemoved"], true);
        } else {
            assert!(has_branch, "a kept tree keeps its branch");
            assert!(result["data"].get("worktreeBranchRemoved").is_none());
            assert!(
                std::path::Path::new(path).join("new.txt").is_file(),
                "the dirty tree is kept"
            );
            let err = result["data"]["worktreeCleanupError"].as_str().unwrap();
            assert!(
                err.starts_with(&format!("Worktree retained at {path}: ")),
                "{err}"
            );
            assert_eq!(details["worktreeCleanupError"], err);
        }
    }
    let plain = by_task("not isolated");
    assert!(plain[1]["data"].get("worktreePath").is_none());
    assert_eq!(
        std::fs::canonicalize(plain[0]["cwd"].as_str().unwrap()).unwrap(),
        root
    );
    let _ = std::fs::remove_dir_all(&base);
}

/// `pi-prompt system` prints what pi-run sends: with the built-in subagents
/// on, the same declared tools (the three control tools included, in the
/// same order) and the same system text as pi-run's first request.
#[test]
fn pi_prompt_system_declares_what_pi_run_sends_with_subagents_on() {
    let sb = Sandbox::new();
    let mock = Mock::start(vec![]);
    mock.configure(&sb.agent());
    enable(&sb, 4);
    let out = sb.cmd("pi-run").args(["-p", "hi"]).output().unwrap();
    ok(&out);
    let first = mock.requests.lock().unwrap()[0].clone();
    let sent: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(sent.contains(&"Agent"), "{sent:?}");
    let recs = jsonl(
        &sb.cmd("pi-prompt")
            .args(["system", "--no-stdin", "--format", "jsonl"])
            .output()
            .unwrap(),
    );
    let planned: Vec<&str> = recs
        .iter()
        .filter(|r| r["type"] == "tool")
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(planned, sent);
    let text = ok(&sb
        .cmd("pi-prompt")
        .args(["system", "--no-stdin", "--format", "text"])
        .output()
        .unwrap());
    assert_eq!(
        text.trim_end(),
        first["messages"][0]["content"].as_str().unwrap().trim_end()
    );
}

/// A background child still `running` when its parent process is killed
/// reads as `interrupted` to the next run, which also writes it so: a
/// `pi-web:subagent-result` entry with that status closes the record (the
/// status entries name the process that ran it).
#[test]
fn a_child_left_running_by_a_killed_parent_is_written_as_interrupted() {
    let sb = Sandbox::new();
    let mock = Mock::start_steps(
        vec![
            vec![agent_call(
                serde_json::json!({"prompt": "LOOP on", "description": "Loop", "run_in_background": true}),
            )],
            vec![],
            vec![("get_subagent_result", r#"{"agent_id": "$ID"}"#.to_string())],
        ],
        None,
    );
    mock.configure(&sb.agent());
    enable(&sb, 4);
    let mut parent = sb
        .cmd("pi-run")
        .args(["-p", "delegate"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    // Killed once the child runs and the parent, its turn over, waits for
    // it (its answer recorded).
    let child = loop {
        let files = session_files(&sb);
        let has = |needle: &str| {
            files
                .iter()
                .find(|f| std::fs::read_to_string(f).is_ok_and(|t| t.contains(needle)))
                .cloned()
        };
        let running = "\"customType\":\"pi-web:subagent-status\",\"data\":{\"version\":1,\"status\":\"running\"";
        if let (Some(f), Some(_)) = (has(running), has("\"text\":\"ack\"")) {
            break f;
        }
        assert!(start.elapsed().as_secs() < 30, "the child never ran");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    parent.kill().unwrap();
    parent.wait().unwrap();
    let last = read_jsonl(&child)
        .into_iter()
        .rev()
        .find(|e| e["customType"] == "pi-web:subagent-status")
        .unwrap();
    assert_eq!(last["data"]["status"], "running");
    assert_eq!(last["data"]["pid"], parent.id());

    let (parent_file, _) = parent_and_children(&sb);
    ok(&sb
        .cmd("pi-run")
        .args(["--session", parent_file.to_str().unwrap(), "-p", "check"])
        .output()
        .unwrap());
    let id = read_jsonl(&child)[0]["id"].as_str().unwrap().to_string();
    let texts = tool_result_texts(&read_jsonl(&parent_file));
    assert_eq!(
        texts.last().unwrap(),
        &(
            format!("Subagent {id} was interrupted before completion."),
            false
        )
    );
    let entries = read_jsonl(&child);
    let closing = entries.last().unwrap();
    assert_eq!(closing["customType"], "pi-web:subagent-result", "{closing}");
    assert_eq!(closing["data"]["status"], "interrupted");
    assert!(closing["data"]["completedAt"].is_string());
}
