//! One `<section>` per tree entry of the exported page: messages with their
//! Markdown rendered, each tool call folded together with its result,
//! thinking and system prompts folded, usage under each answer; entries a
//! reader rarely needs (labels, extension data, usage records, context
//! edits) are marked `minor` and hidden until asked for.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde_json::Value;

use crate::format::{AgentMessage, ContentBlock, Entry, Usage};

use super::super::Session;
use super::{escape_html as esc, fmt_cost, fmt_tokens, markdown};

/// What the sections need to know about the whole file.
pub(super) struct Ctx<'a> {
    pub s: &'a Session,
    pub labels: HashMap<String, String>,
    /// (assistant entry, tool call id) → the entry holding its result.
    results: HashMap<(usize, &'a str), usize>,
    /// Result entry → the element id of the call it was folded into.
    pub folded: HashMap<usize, String>,
    /// Result entry → a one-line description of its call.
    pub call_lines: HashMap<usize, String>,
}

/// The element id of the `n`th tool call of entry `id`.
fn call_elem(id: &str, n: usize) -> String {
    format!("c-{id}-{n}")
}

impl<'a> Ctx<'a> {
    pub fn new(s: &'a Session) -> Ctx<'a> {
        let mut results = HashMap::new();
        let mut folded = HashMap::new();
        let mut call_lines = HashMap::new();
        for (r, e) in s.entries.iter().enumerate() {
            let Some(AgentMessage::ToolResult(res)) = e.message() else {
                continue;
            };
            // The call is in an assistant message a few entries above (its
            // siblings' results and steering messages may sit between).
            let mut cur = s.parent_index(r);
            for _ in 0..64 {
                let Some(a) = cur else { break };
                if let Some(AgentMessage::Assistant(m)) = s.entries[a].message() {
                    let calls = m.content.iter().filter_map(|b| match b {
                        ContentBlock::ToolCall(c) => Some(c),
                        _ => None,
                    });
                    if let Some((n, c)) = calls.enumerate().find(|(_, c)| c.id == res.tool_call_id)
                    {
                        if let std::collections::hash_map::Entry::Vacant(v) =
                            results.entry((a, c.id.as_str()))
                        {
                            v.insert(r);
                            folded.insert(r, call_elem(s.entries[a].id(), n));
                            call_lines.insert(r, call_line(&c.name, &c.arguments));
                        }
                        break;
                    }
                }
                cur = s.parent_index(a);
            }
        }
        Ctx {
            s,
            labels: s.labels(),
            results,
            folded,
            call_lines,
        }
    }
}

/// A short time of day for an ISO timestamp (`18:55:29`).
fn time_of(ts: &str) -> &str {
    ts.get(11..19).unwrap_or(ts)
}

/// The first line of `text`, at most `max` characters.
pub(super) fn one_line(text: &str, max: usize) -> String {
    let line = text.trim().lines().next().unwrap_or("");
    if line.chars().count() > max {
        let mut s: String = line.chars().take(max.saturating_sub(1)).collect();
        s.push('…');
        s
    } else {
        line.to_string()
    }
}

/// What a tool call is about, in one line: its command, path or pattern,
/// else its arguments as compact JSON.
fn call_what(name: &str, args: &Value) -> String {
    let pick = |k: &str| args.get(k).and_then(Value::as_str);
    let what = match name {
        "bash" => pick("command"),
        "read" | "write" | "edit" | "ls" => pick("path"),
        "grep" | "find" => pick("pattern"),
        _ => None,
    };
    match what {
        Some(w) => one_line(w, 100),
        None if args.is_null() || args.as_object().is_some_and(|o| o.is_empty()) => String::new(),
        None => one_line(&args.to_string(), 100),
    }
}

/// A tool call in one line: its name and what it is about.
pub(super) fn call_line(name: &str, args: &Value) -> String {
    let what = call_what(name, args);
    if what.is_empty() {
        name.to_string()
    } else {
        format!("{name} {what}")
    }
}

fn usage_line(u: &Usage) -> String {
    let mut parts = vec![
        format!("↑{}", fmt_tokens(u.input.as_u64())),
        format!("↓{}", fmt_tokens(u.output.as_u64())),
    ];
    if u.cache_read.as_u64() > 0 {
        parts.push(format!("R{}", fmt_tokens(u.cache_read.as_u64())));
    }
    if u.cache_write.as_u64() > 0 {
        parts.push(format!("W{}", fmt_tokens(u.cache_write.as_u64())));
    }
    let cost = u.cost.total.as_f64();
    if cost > 0.0 {
        parts.push(fmt_cost(cost));
    }
    parts.join(" ")
}

/// Plain text kept as written (line breaks and spaces shown).
fn plain(out: &mut String, text: &str) {
    let _ = write!(out, "<div class=\"plain\">{}</div>", esc(text));
}

fn image(out: &mut String, mime: &str, data: &str) {
    // Only image types a browser shows; the data stays base64 (escaped, so
    // it cannot leave the attribute).
    let mime = if mime.starts_with("image/") && !mime.contains("svg") {
        mime
    } else {
        "application/octet-stream"
    };
    let _ = write!(
        out,
        "<img alt=\"image\" src=\"data:{};base64,{}\">",
        esc(mime),
        esc(data)
    );
}

/// Result content: text in one block, images shown.
fn result_body(out: &mut String, blocks: &[ContentBlock], details: Option<&Value>) {
    let text = crate::format::message::blocks_text(blocks, "\n");
    if !text.is_empty() {
        let _ = write!(out, "<pre class=\"out\">{}</pre>", esc(&text));
    }
    for b in blocks {
        if let ContentBlock::Image(i) = b {
            image(out, &i.mime_type, &i.data);
        }
    }
    if let Some(diff) = details.and_then(|d| d.get("diff")).and_then(Value::as_str) {
        out.push_str("<pre class=\"diff\">");
        for line in diff.lines() {
            let class = match line.as_bytes().first() {
                Some(b'+') => "add",
                Some(b'-') => "del",
                _ => "ctx",
            };
            let _ = writeln!(out, "<span class=\"{class}\">{}</span>", esc(line));
        }
        out.push_str("</pre>");
    }
}

/// A call's arguments, one row per field; strings shown as written.
fn args_body(out: &mut String, args: &Value) {
    let Some(obj) = args.as_object() else {
        if !args.is_null() {
            let pretty = serde_json::to_string_pretty(args).unwrap_or_default();
            let _ = write!(out, "<pre class=\"args\">{}</pre>", esc(&pretty));
        }
        return;
    };
    out.push_str("<dl class=\"args\">");
    for (k, v) in obj {
        let text = match v {
            Value::String(s) => s.clone(),
            other => serde_json::to_string_pretty(other).unwrap_or_default(),
        };
        let _ = write!(out, "<dt>{}</dt><dd><pre>{}</pre></dd>", esc(k), esc(&text));
    }
    out.push_str("</dl>");
}

impl Ctx<'_> {
    /// The tool call `n` of assistant entry `i`, folded with its result.
    fn tool_call(
        &self,
        out: &mut String,
        i: usize,
        n: usize,
        c: &crate::format::message::ToolCallBlock,
    ) {
        let result = self.results.get(&(i, c.id.as_str())).and_then(|&r| {
            match self.s.entries[r].message() {
                Some(AgentMessage::ToolResult(res)) => Some(res),
                _ => None,
            }
        });
        let (state, mark) = match result {
            Some(r) if r.is_error => ("error", "✗"),
            Some(_) => ("ok", "✓"),
            None => ("none", "…"),
        };
        let _ = write!(
            out,
            "<details class=\"tool {state}\" id=\"{}\"><summary><span class=\"mark\">{mark}</span> <b>{}</b> {}</summary>",
            esc(&call_elem(self.s.entries[i].id(), n)),
            esc(&c.name),
            esc(&call_what(&c.name, &c.arguments)),
        );
        args_body(out, &c.arguments);
        match result {
            Some(r) => result_body(out, &r.content, r.details.as_ref()),
            None => out.push_str("<p class=\"note\">no result recorded</p>"),
        }
        out.push_str("</details>");
    }

    fn blocks(&self, out: &mut String, i: usize, blocks: &[ContentBlock], markdown_text: bool) {
        let mut calls = 0;
        for b in blocks {
            match b {
                ContentBlock::Text(t) if markdown_text => {
                    let _ = write!(
                        out,
                        "<div class=\"md\">{}</div>",
                        markdown::to_html(&t.text)
                    );
                }
                ContentBlock::Text(t) => plain(out, &t.text),
                ContentBlock::Thinking(t) if !t.thinking.trim().is_empty() => {
                    let _ = write!(
                        out,
                        "<details class=\"thinking\" open><summary>Thinking</summary><div class=\"plain\">{}</div></details>",
                        esc(t.thinking.trim())
                    );
                }
                ContentBlock::Thinking(_) | ContentBlock::Unknown(_) => {}
                ContentBlock::Image(img) => image(out, &img.mime_type, &img.data),
                ContentBlock::ToolCall(c) => {
                    self.tool_call(out, i, calls, c);
                    calls += 1;
                }
            }
        }
    }

    /// The opening of a section: its tree links, classes and heading.
    fn open(&self, out: &mut String, i: usize, class: &str, head: &str, hidden: bool) {
        let e = &self.s.entries[i];
        let parent = self
            .s
            .parent_index(i)
            .map(|p| self.s.entries[p].id())
            .unwrap_or("");
        let fold = match self.folded.get(&i) {
            Some(f) => format!(" data-fold=\"{}\"", esc(f)),
            None => String::new(),
        };
        let _ = write!(
            out,
            "<section class=\"entry {class}\" id=\"e-{id}\" data-id=\"{id}\" data-parent=\"{}\"{fold}{}>",
            esc(parent),
            if hidden { " hidden" } else { "" },
            id = esc(e.id()),
        );
        let label = match self.labels.get(e.id()) {
            Some(l) => format!(" <span class=\"label\">{}</span>", esc(l)),
            None => String::new(),
        };
        let ts = e.timestamp();
        let _ = write!(
            out,
            "<div class=\"head\"><span class=\"who\">{}</span>{label}<time title=\"{}\">{}</time></div>",
            esc(head),
            esc(ts),
            esc(time_of(ts))
        );
    }

    /// An extension's message (an entry or a message of the context):
    /// `(display, custom type, text)`; one not displayed is minor.
    fn custom(&self, out: &mut String, i: usize, msg: (bool, &str, &str), hidden: bool) {
        let (display, custom_type, text) = msg;
        let class = if display { "custom" } else { "custom minor" };
        self.open(
            out,
            i,
            class,
            &format!("Extension message · {custom_type}"),
            hidden,
        );
        let _ = write!(out, "<div class=\"md\">{}</div>", markdown::to_html(text));
    }

    /// The section of tree entry `i`; `hidden` when it is off the branch
    /// the page opens on.
    pub fn section(&self, out: &mut String, i: usize, hidden: bool) {
        let e = &self.s.entries[i];
        match e {
            Entry::Message(m) => self.message(out, i, &m.message, hidden),
            Entry::CustomMessage(c) => self.custom(
                out,
                i,
                (c.display, &c.custom_type, &c.content.joined_text("\n")),
                hidden,
            ),
            Entry::Compaction(c) => {
                self.open(out, i, "summary", "Compaction", hidden);
                let _ = write!(
                    out,
                    "<details><summary>Summary of {} tokens of earlier conversation</summary><div class=\"md\">{}</div></details>",
                    fmt_tokens(c.tokens_before.as_u64()),
                    markdown::to_html(&c.summary)
                );
            }
            Entry::BranchSummary(b) => {
                self.open(out, i, "summary", "Branch summary", hidden);
                let _ = write!(
                    out,
                    "<div class=\"md\">{}</div>",
                    markdown::to_html(&b.summary)
                );
            }
            Entry::ModelChange(m) => {
                self.open(
                    out,
                    i,
                    "meta",
                    &format!("Model: {}/{}", m.provider, m.model_id),
                    hidden,
                );
            }
            Entry::ThinkingLevelChange(t) => {
                self.open(
                    out,
                    i,
                    "meta",
                    &format!("Thinking level: {}", t.thinking_level),
                    hidden,
                );
            }
            Entry::SessionInfo(n) => {
                let name = n.name.as_deref().map(str::trim).unwrap_or("");
                self.open(out, i, "meta", &format!("Session name: {name}"), hidden);
            }
            Entry::Label(l) => {
                let text = l.label.as_deref().unwrap_or("(cleared)");
                self.open(
                    out,
                    i,
                    "meta minor",
                    &format!("Label {text} on {}", l.target_id),
                    hidden,
                );
            }
            Entry::Custom(c) => {
                self.open(
                    out,
                    i,
                    "meta minor",
                    &format!("Extension data · {}", c.custom_type),
                    hidden,
                );
                if let Some(d) = &c.data {
                    let pretty = serde_json::to_string_pretty(d).unwrap_or_default();
                    let _ = write!(
                        out,
                        "<details><summary>data</summary><pre>{}</pre></details>",
                        esc(&pretty)
                    );
                }
            }
            Entry::Usage(u) => {
                let head = format!(
                    "Usage · {} · {}/{} · {}",
                    u.kind,
                    u.provider,
                    u.model,
                    usage_line(&u.usage)
                );
                self.open(out, i, "meta minor", &head, hidden);
            }
            Entry::ContextEdit(c) => {
                self.open(
                    out,
                    i,
                    "meta minor",
                    &format!("Context edit of {}", c.target_id),
                    hidden,
                );
            }
            Entry::Unknown(_) => {
                self.open(
                    out,
                    i,
                    "meta minor",
                    &format!("Entry of type {}", e.kind()),
                    hidden,
                );
            }
        }
        out.push_str("</section>\n");
    }

    fn message(&self, out: &mut String, i: usize, m: &AgentMessage, hidden: bool) {
        match m {
            AgentMessage::User(u) => {
                self.open(out, i, "user", "User", hidden);
                self.blocks(out, i, &u.content.to_blocks(), false);
            }
            AgentMessage::Assistant(a) => {
                let failed = a.stop_reason == "error" || a.stop_reason == "aborted";
                let class = if failed {
                    "assistant error"
                } else {
                    "assistant"
                };
                self.open(out, i, class, &format!("Assistant · {}", a.model), hidden);
                self.blocks(out, i, &a.content, true);
                if let Some(err) = &a.error_message {
                    let _ = write!(
                        out,
                        "<p class=\"err\">{}: {}</p>",
                        esc(&a.stop_reason),
                        esc(err)
                    );
                }
                let _ = write!(
                    out,
                    "<div class=\"usage\">{}/{} · {}</div>",
                    esc(&a.provider),
                    esc(&a.model),
                    esc(&usage_line(&a.usage))
                );
            }
            AgentMessage::ToolResult(r) => match self.folded.get(&i) {
                // Shown inside its call; the section only keeps the tree whole.
                Some(_) => self.open(
                    out,
                    i,
                    "folded",
                    &format!("Result of {}", r.tool_name),
                    hidden,
                ),
                None => {
                    self.open(
                        out,
                        i,
                        "tool-result",
                        &format!("Result of {}", r.tool_name),
                        hidden,
                    );
                    let state = if r.is_error { "error" } else { "ok" };
                    let _ = write!(
                        out,
                        "<details class=\"tool {state}\"><summary><b>{}</b> result</summary>",
                        esc(&r.tool_name)
                    );
                    result_body(out, &r.content, r.details.as_ref());
                    out.push_str("</details>");
                }
            },
            AgentMessage::BashExecution(b) => {
                self.open(out, i, "user", "User shell command", hidden);
                let exit = b.exit_code.as_ref().map(|c| c.as_i64());
                let state = if exit.unwrap_or(0) == 0 && !b.cancelled {
                    "ok"
                } else {
                    "error"
                };
                let _ = write!(
                    out,
                    "<details class=\"tool {state}\"><summary><b>$</b> {}</summary><pre class=\"out\">{}</pre>",
                    esc(&one_line(&b.command, 100)),
                    esc(&b.output)
                );
                if let Some(code) = exit {
                    let _ = write!(out, "<p class=\"note\">exit code {code}</p>");
                }
                out.push_str("</details>");
            }
            AgentMessage::Custom(c) => self.custom(
                out,
                i,
                (c.display, &c.custom_type, &c.content.joined_text("\n")),
                hidden,
            ),
            AgentMessage::System(sys) => {
                self.open(out, i, "system", "System prompt", hidden);
                let text = m.text();
                let _ = write!(
                    out,
                    "<details class=\"system\"><summary>{} lines</summary><pre>{}</pre></details>",
                    text.lines().count(),
                    esc(&text)
                );
                for t in sys.tools_added.iter().flatten() {
                    let name = t.get("name").and_then(Value::as_str).unwrap_or("?");
                    let desc = t.get("description").and_then(Value::as_str).unwrap_or("");
                    let params = t
                        .get("parameters")
                        .map(|p| serde_json::to_string_pretty(p).unwrap_or_default())
                        .unwrap_or_default();
                    let _ = write!(
                        out,
                        "<details class=\"tooldef\"><summary>tool <b>{}</b> · {}</summary><pre>{}</pre></details>",
                        esc(name),
                        esc(&one_line(desc, 120)),
                        esc(&params)
                    );
                }
                for t in sys.tools_removed.iter().flatten() {
                    let name = t.get("name").and_then(Value::as_str).unwrap_or("?");
                    let _ = write!(out, "<p class=\"note\">tool {} removed</p>", esc(name));
                }
            }
            AgentMessage::BranchSummary(b) => {
                self.open(out, i, "summary", "Branch summary", hidden);
                let _ = write!(
                    out,
                    "<div class=\"md\">{}</div>",
                    markdown::to_html(&b.summary)
                );
            }
            AgentMessage::CompactionSummary(c) => {
                self.open(out, i, "summary", "Compaction", hidden);
                let _ = write!(
                    out,
                    "<div class=\"md\">{}</div>",
                    markdown::to_html(&c.summary)
                );
            }
            AgentMessage::Unknown(_) => {
                self.open(
                    out,
                    i,
                    "meta minor",
                    &format!("Message of role {}", m.role()),
                    hidden,
                );
            }
        }
    }

    /// The sidebar line of entry `i`: who, then what.
    pub fn tree_text(&self, i: usize) -> (&'static str, String) {
        let e = &self.s.entries[i];
        let first = |t: &str| one_line(t, 90);
        match e {
            Entry::Message(m) => match &m.message {
                AgentMessage::User(u) => ("user", first(&u.content.joined_text(" "))),
                AgentMessage::Assistant(a) => {
                    let text = crate::format::message::blocks_text(&a.content, " ");
                    if !text.trim().is_empty() {
                        ("assistant", first(&text))
                    } else {
                        let calls: Vec<&str> = a
                            .content
                            .iter()
                            .filter_map(|b| match b {
                                ContentBlock::ToolCall(c) => Some(c.name.as_str()),
                                _ => None,
                            })
                            .collect();
                        match (&a.error_message, calls.is_empty()) {
                            (Some(err), true) => ("assistant", first(err)),
                            _ => ("assistant", format!("[{}]", calls.join(", "))),
                        }
                    }
                }
                AgentMessage::ToolResult(r) => (
                    "tool",
                    format!(
                        "[{}]",
                        self.call_lines
                            .get(&i)
                            .cloned()
                            .unwrap_or_else(|| r.tool_name.clone())
                    ),
                ),
                AgentMessage::BashExecution(b) => ("user", format!("$ {}", first(&b.command))),
                AgentMessage::Custom(c) => ("meta", format!("[{}]", c.custom_type)),
                AgentMessage::System(_) => ("meta", "[system prompt]".into()),
                AgentMessage::BranchSummary(b) => {
                    ("meta", format!("[branch summary] {}", first(&b.summary)))
                }
                AgentMessage::CompactionSummary(_) => ("meta", "[compaction]".into()),
                other => ("minor", format!("[{}]", other.role())),
            },
            Entry::CustomMessage(c) => ("meta", format!("[{}]", c.custom_type)),
            Entry::Compaction(_) => ("meta", "[compaction]".into()),
            Entry::BranchSummary(b) => ("meta", format!("[branch summary] {}", first(&b.summary))),
            Entry::ModelChange(m) => ("meta", format!("[model {}/{}]", m.provider, m.model_id)),
            Entry::ThinkingLevelChange(t) => ("meta", format!("[thinking {}]", t.thinking_level)),
            Entry::SessionInfo(n) => (
                "meta",
                format!("[name {}]", n.name.as_deref().unwrap_or("")),
            ),
            other => ("minor", format!("[{}]", other.kind())),
        }
    }

    /// Whether entry `i` is hidden until the reader asks for everything.
    pub fn is_minor(&self, i: usize) -> bool {
        match &self.s.entries[i] {
            Entry::Label(_)
            | Entry::Custom(_)
            | Entry::Usage(_)
            | Entry::ContextEdit(_)
            | Entry::Unknown(_) => true,
            Entry::CustomMessage(c) => !c.display,
            Entry::Message(m) => match &m.message {
                AgentMessage::Custom(c) => !c.display,
                AgentMessage::Unknown(_) => true,
                _ => false,
            },
            _ => false,
        }
    }
}
