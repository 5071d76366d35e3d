//! The HTML export of a session: one self-contained page that works offline.
//! A sidebar holds the whole entry tree (every branch, with a filter); the
//! page opens on the current branch and a click on any entry shows the
//! branch through it. The header carries the session's token and cost
//! totals. Everything is rendered here, at export time (Markdown included),
//! so the page needs no network; its only script is the small tree
//! navigation below, allowed by hash in the page's Content-Security-Policy,
//! so nothing a session holds can run as script even if it got past the
//! escaping.

mod entries;
pub mod markdown;

use std::fmt::Write as _;

use base64::Engine as _;
use sha2::Digest as _;

use super::Session;

const CSS: &str = include_str!("page.css");
const JS: &str = include_str!("page.js");

/// HTML-escapes text (for element content and quoted attributes).
pub fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A token count as people read it: `950`, `2.3k`, `1.2M`.
pub(crate) fn fmt_tokens(n: u64) -> String {
    match n {
        0..=999 => n.to_string(),
        1_000..=999_999 => trim_zero(format!("{:.1}", n as f64 / 1e3)) + "k",
        _ => trim_zero(format!("{:.1}", n as f64 / 1e6)) + "M",
    }
}

fn trim_zero(s: String) -> String {
    s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
}

/// A cost in dollars: four decimals below a cent, else two.
pub(crate) fn fmt_cost(c: f64) -> String {
    if c < 0.01 {
        format!("${c:.4}")
    } else {
        format!("${c:.2}")
    }
}

/// The page's Content-Security-Policy: nothing from the network, images
/// only from the page itself, inline style, and only this page's script.
fn csp() -> String {
    let hash = sha2::Sha256::digest(JS.as_bytes());
    let b64 = base64::engine::general_purpose::STANDARD.encode(hash);
    format!("default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'sha256-{b64}'; base-uri 'none'; form-action 'none'")
}

/// The header: what the session is, and its totals over every branch.
fn header(out: &mut String, s: &Session, title: &str) {
    let st = s.stats();
    let _ = write!(
        out,
        "<header><h1>{}</h1><dl class=\"facts\">",
        escape_html(title)
    );
    let mut row = |k: &str, v: String| {
        let _ = write!(out, "<dt>{k}</dt><dd>{v}</dd>");
    };
    row("Session", format!("<code>{}</code>", escape_html(s.id())));
    row(
        "Directory",
        format!("<code>{}</code>", escape_html(&s.header.cwd)),
    );
    row("Created", escape_html(&s.header.timestamp));
    if let Some(p) = &s.header.parent_session {
        row("Forked from", format!("<code>{}</code>", escape_html(p)));
    }
    let models: Vec<String> = st
        .per_model
        .keys()
        .filter(|k| !k.starts_with('('))
        .map(|k| escape_html(k))
        .collect();
    if !models.is_empty() {
        row("Models", models.join(", "));
    }
    let counts: Vec<String> = st
        .messages
        .iter()
        .map(|(role, n)| {
            let role = match role.as_str() {
                "toolResult" => "tool result",
                "bashExecution" => "shell command",
                "branchSummary" => "branch summary",
                "compactionSummary" => "compaction summary",
                other => other,
            };
            format!("{n} {}", escape_html(role))
        })
        .collect();
    row("Messages", counts.join(", "));
    row("Tool calls", st.tool_calls.to_string());
    let t = &st.total;
    let mut tokens = format!("↑{} ↓{}", fmt_tokens(t.input), fmt_tokens(t.output));
    if t.cache_read > 0 {
        let _ = write!(tokens, " R{}", fmt_tokens(t.cache_read));
    }
    if t.cache_write > 0 {
        let _ = write!(tokens, " W{}", fmt_tokens(t.cache_write));
    }
    row(
        "Tokens",
        format!(
            "<span title=\"input {} · output {} · cache read {} · cache write {}\">{tokens}</span> ({} in all)",
            t.input,
            t.output,
            t.cache_read,
            t.cache_write,
            fmt_tokens(t.total_tokens)
        ),
    );
    row("Cost", fmt_cost(t.cost));
    out.push_str("</dl>");
    if st.per_model.len() > 1 {
        out.push_str("<table class=\"models\"><tr><th>model</th><th>responses</th><th>input</th><th>output</th><th>cache read</th><th>cache write</th><th>cost</th></tr>");
        for (m, t) in &st.per_model {
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape_html(m),
                t.responses,
                t.input,
                t.output,
                t.cache_read,
                t.cache_write,
                fmt_cost(t.cost)
            );
        }
        out.push_str("</table>");
    }
    out.push_str(
        "<div class=\"tools\"><button type=\"button\" id=\"open-tools\">Open tool calls</button>\
<button type=\"button\" id=\"close-tools\">Close tool calls</button>\
<button type=\"button\" id=\"toggle-thinking\">Hide thinking</button>\
<label><input type=\"checkbox\" id=\"show-minor\"> Show hidden entries</label></div></header>\n",
    );
}

/// The session as one self-contained HTML page: every entry of every
/// branch, opened on the current branch.
pub fn to_html(s: &Session) -> String {
    let ctx = entries::Ctx::new(s);
    let title = s.name().unwrap_or_else(|| format!("Session {}", s.id()));
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta http-equiv=\"Content-Security-Policy\" content=\"{}\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>{}</title><style>{CSS}</style></head>\n<body>\n",
        csp(),
        escape_html(&title)
    );
    let rows = s.tree_rows();
    let on_branch: std::collections::HashSet<usize> = s.branch().into_iter().collect();

    // The sidebar: the tree, drawn as `pi-session tree` draws it.
    let _ = write!(
        out,
        "<nav id=\"tree\"><input type=\"search\" id=\"filter\" placeholder=\"Filter entries\" aria-label=\"Filter entries\"><ol>"
    );
    for r in &rows {
        let id = escape_html(s.entries[r.index].id());
        let (who, text) = ctx.tree_text(r.index);
        let mut class = vec![who];
        if ctx.is_minor(r.index) {
            class.push("minor");
        }
        if r.on_branch {
            class.push("on");
        }
        if r.is_leaf {
            class.push("leaf");
        }
        let label = match ctx.labels.get(s.entries[r.index].id()) {
            Some(l) => format!("<span class=\"label\">{}</span> ", escape_html(l)),
            None => String::new(),
        };
        let role = match who {
            "user" | "assistant" => format!("<span class=\"role\">{who}:</span>"),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "<li class=\"{}\" data-id=\"{id}\"><a href=\"#e-{id}\"><span class=\"lead\">{}</span>{role}{label}{}</a></li>",
            class.join(" "),
            escape_html(&r.prefix),
            escape_html(&text)
        );
    }
    let leaf = s.leaf_id().unwrap_or("");
    let _ = write!(
        out,
        "</ol><p class=\"count\">{} entries; the session's current branch ({} entries) ends at ●</p></nav>\n<main>",
        rows.len(),
        on_branch.len()
    );
    header(&mut out, s, &title);
    let _ = writeln!(
        out,
        "<div id=\"entries\" data-leaf=\"{}\">",
        escape_html(leaf)
    );
    for r in &rows {
        ctx.section(&mut out, r.index, !r.on_branch);
    }
    let _ = write!(
        out,
        "</div></main>\n<script>{JS}</script>\n</body></html>\n"
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn session(lines: &[&str]) -> Session {
        let mut text = String::from(
            r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}"#,
        );
        for l in lines {
            text.push('\n');
            text.push_str(l);
        }
        text.push('\n');
        Session::parse(Path::new("t.jsonl"), text.as_bytes()).unwrap()
    }

    const USER: &str = r#"{"type":"message","id":"u1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"<script>alert('u')</script> hi","timestamp":1}}"#;
    const CALL: &str = r#"{"type":"message","id":"a1","parentId":"u1","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"Let me **read** it. <img src=x onerror=alert(1)>"},{"type":"toolCall","id":"call_1","name":"read","arguments":{"path":"notes.txt"}}],"provider":"mock","model":"m","usage":{"input":1200,"output":30,"cacheRead":0,"cacheWrite":0,"totalTokens":1230,"cost":{"input":0.0036,"output":0.00045,"cacheRead":0,"cacheWrite":0,"total":0.00405}},"stopReason":"toolUse","timestamp":2}}"#;
    const RESULT: &str = r#"{"type":"message","id":"r1","parentId":"a1","timestamp":"2026-01-01T00:00:03.000Z","message":{"role":"toolResult","toolCallId":"call_1","toolName":"read","content":[{"type":"text","text":"</pre><script>alert('r')</script>"}],"isError":false,"timestamp":3}}"#;
    const ANSWER: &str = r#"{"type":"message","id":"a2","parentId":"r1","timestamp":"2026-01-01T00:00:04.000Z","message":{"role":"assistant","content":[{"type":"text","text":"It says `hello`."}],"provider":"mock","model":"m","usage":{"input":1300,"output":10,"cacheRead":0,"cacheWrite":0,"totalTokens":1310,"cost":{"input":0.0039,"output":0.00015,"cacheRead":0,"cacheWrite":0,"total":0.00405}},"stopReason":"stop","timestamp":4}}"#;
    const OTHER: &str = r#"{"type":"message","id":"u2","parentId":null,"timestamp":"2026-01-01T00:00:05.000Z","message":{"role":"user","content":"another start","timestamp":5}}"#;

    #[test]
    fn tool_call_folded_with_its_result() {
        let h = to_html(&session(&[USER, CALL, RESULT, ANSWER]));
        let call = h
            .find("<details class=\"tool ok\" id=\"c-a1-0\">")
            .expect(&h);
        let result = h.find("&lt;/pre&gt;&lt;script&gt;").expect(&h);
        let end = call + h[call..].find("</details>").unwrap();
        assert!(call < result && result < end, "{h}");
        assert!(h.contains("data-fold=\"c-a1-0\""), "{h}");
        assert!(
            h.contains("<strong>read</strong>"),
            "markdown rendered: {h}"
        );
        assert!(h.contains("<code>hello</code>"), "{h}");
    }

    #[test]
    fn nothing_from_the_session_becomes_markup() {
        let h = to_html(&session(&[USER, CALL, RESULT, ANSWER]));
        // The one script is the page's own.
        assert_eq!(h.matches("<script").count(), 1, "{h}");
        assert!(!h.contains("<img src=x"), "{h}");
        assert!(h.contains(&format!("<script>{JS}</script>")));
    }

    #[test]
    fn totals_and_branches() {
        let h = to_html(&session(&[USER, CALL, RESULT, ANSWER, OTHER]));
        assert!(h.contains("↑2.5k ↓40"), "{h}");
        assert!(h.contains("$0.0081"), "{h}");
        assert!(h.contains("<dt>Tool calls</dt><dd>1</dd>"), "{h}");
        // The leaf is the last entry: the first start is off the branch.
        assert!(
            h.contains("id=\"e-u1\" data-id=\"u1\" data-parent=\"\" hidden>"),
            "{h}"
        );
        assert!(
            h.contains("id=\"e-u2\" data-id=\"u2\" data-parent=\"\">"),
            "{h}"
        );
        assert!(h.contains("data-leaf=\"u2\""), "{h}");
    }

    #[test]
    fn csp_allows_exactly_the_page_script() {
        let h = to_html(&session(&[USER]));
        let hash =
            base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(JS.as_bytes()));
        assert!(h.contains(&format!("script-src 'sha256-{hash}'")), "{h}");
        assert!(h.contains("default-src 'none'"));
    }

    #[test]
    fn token_counts_read_well() {
        assert_eq!(fmt_tokens(950), "950");
        assert_eq!(fmt_tokens(2300), "2.3k");
        assert_eq!(fmt_tokens(2000), "2k");
        assert_eq!(fmt_tokens(1_250_000), "1.2M");
        assert_eq!(fmt_cost(0.008), "$0.0080");
        assert_eq!(fmt_cost(1.5), "$1.50");
    }
}
