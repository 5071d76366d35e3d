//! A script's result as the model sees it, in pi's words: a header block
//! (`Script completed|failed`, the wall time, `Output:`), then the output
//! items in order — text items with `==> text i/N <==` headers when there
//! are several, each image after a `[Image saved to …]` line naming the
//! temp file it was saved to, the `<console_output>` block last — and for a
//! failure `Script error:` with the error and the calls made before it.
//! Output past the token budget keeps its head and tail; the whole text
//! goes to a private temp file named in the result. `details.calls` lists
//! the nested calls.

use std::io::Write as _;
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::engine::{Failure, Item, Outcome};
use crate::format::message::ImageBlock;
use crate::format::ContentBlock;
use crate::tools::ToolOutput;

/// One nested call as `details.calls` lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRecord {
    /// `<parent>/<n>` once it ended; `<parent>/?` while it runs (or when
    /// it was cancelled before it ended).
    pub id: String,
    pub name: String,
    /// The arguments as the script passed them (JSON text).
    pub args: String,
    /// `running`, `ok`, `error` or `cancelled`.
    pub status: &'static str,
    pub duration_ms: Option<f64>,
    pub error: Option<String>,
}

impl CallRecord {
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("id".into(), self.id.clone().into());
        m.insert("name".into(), self.name.clone().into());
        m.insert("args".into(), self.args.clone().into());
        m.insert("status".into(), self.status.into());
        if let Some(d) = self.duration_ms {
            m.insert("durationMs".into(), json!(d));
        }
        if let Some(e) = &self.error {
            m.insert("error".into(), e.clone().into());
        }
        Value::Object(m)
    }
}

/// `details` of a codemode result or partial result.
pub fn details(calls: &[CallRecord]) -> Value {
    json!({"calls": calls.iter().map(CallRecord::to_json).collect::<Vec<_>>()})
}

/// `/tmp/pi-codemode-<hex>.<ext>` with `bytes`, private to the user.
fn save(bytes: &[u8], ext: &str) -> Option<std::path::PathBuf> {
    let u = uuid::Uuid::new_v4();
    let hex: String = u.as_bytes()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let path = std::env::temp_dir().join(format!("pi-codemode-{hex}.{ext}"));
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    let mut f = o.open(&path).ok()?;
    f.write_all(bytes).ok()?;
    Some(path)
}

/// Keeps the head and tail of text over `max_tokens` (4 characters a
/// token); the whole text goes to a temp file (its path also in
/// `details.fullOutputPath`).
fn budget(text: &str, max_tokens: u64, details: &mut Value) -> String {
    let n = text.chars().count() as u64;
    let tokens = n.div_ceil(4);
    if tokens <= max_tokens {
        return text.to_string();
    }
    let keep = (max_tokens * 4 / 2) as usize;
    let head: String = text.chars().take(keep).collect();
    let tail: String = text.chars().skip(n as usize - keep).collect();
    let lines = text.split('\n').count();
    let mut out = format!(
        "Warning: truncated output (original token count: {tokens})\nTotal output lines: {lines}\n\n{head}…{} tokens truncated…{tail}",
        tokens - max_tokens
    );
    if let Some(path) = save(text.as_bytes(), "txt") {
        out.push_str(&format!(
            "\n\n[Full output: {} (read with offset/limit)]",
            path.display()
        ));
        if let Value::Object(m) = details {
            m.insert("fullOutputPath".into(), path.display().to_string().into());
        }
    }
    out
}

/// The error text of a failure.
fn error_text(f: &Failure, timeout_ms: Option<u64>) -> String {
    match f {
        Failure::Script(t) => t.clone(),
        Failure::Timeout => format!(
            "Script timed out: Execution timed out after {} ms",
            timeout_ms.unwrap_or(0)
        ),
        Failure::Aborted => "Script aborted: Execution was aborted".into(),
        Failure::Sandbox(e) => format!("Codemode sandbox failed: {e}"),
    }
}

/// The whole result of one script.
pub fn result(
    outcome: &Outcome,
    calls: &[CallRecord],
    wall: Duration,
    max_tokens: u64,
    timeout_ms: Option<u64>,
) -> ToolOutput {
    let failed = outcome.failure.is_some();
    let header = format!(
        "Script {}\nWall time {:.1} seconds\nOutput:\n",
        if failed { "failed" } else { "completed" },
        wall.as_secs_f64()
    );
    let mut d = details(calls);
    let texts = outcome
        .items
        .iter()
        .filter(|i| matches!(i, Item::Text(_)))
        .count();
    // Text parts of the block being built, and the finished blocks.
    let mut parts: Vec<String> = Vec::new();
    let mut blocks: Vec<ContentBlock> = vec![ContentBlock::text(header)];
    let mut console: Vec<&str> = Vec::new();
    let mut nth = 0;
    for item in &outcome.items {
        match item {
            Item::Text(t) => {
                nth += 1;
                parts.push(if texts > 1 {
                    format!("==> text {nth}/{texts} <==\n{t}")
                } else {
                    t.clone()
                });
            }
            Item::Console(l) => console.push(l),
            Item::Image { data, mime } => {
                use base64::Engine as _;
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .unwrap_or_default();
                let ext = mime.strip_prefix("image/").unwrap_or("bin");
                let ext = if ext == "jpeg" { "jpg" } else { ext };
                if let Some(p) = save(&bytes, ext) {
                    parts.push(format!(
                        "[Image saved to {} ({mime}, {})]",
                        p.display(),
                        crate::sizefmt::format_size(bytes.len())
                    ));
                }
                if !parts.is_empty() {
                    let text = budget(&parts.join("\n"), max_tokens, &mut d);
                    blocks.push(ContentBlock::text(text));
                    parts.clear();
                }
                blocks.push(ContentBlock::Image(ImageBlock {
                    data: data.clone(),
                    mime_type: mime.clone(),
                    extra: Map::new(),
                }));
            }
        }
    }
    if !console.is_empty() {
        parts.push(format!(
            "<console_output>\n{}\n</console_output>",
            console.join("\n")
        ));
    }
    if let Some(f) = &outcome.failure {
        let summary = if calls.is_empty() {
            "No tool calls were made.".to_string()
        } else {
            let list: Vec<String> = calls
                .iter()
                .map(|c| format!("{} ({})", c.name, c.status))
                .collect();
            format!(
                "Tool calls made before the failure (they are not undone): {}",
                list.join(", ")
            )
        };
        parts.push(format!(
            "Script error:\n{}\n\n{summary}",
            error_text(f, timeout_ms)
        ));
    }
    if !parts.is_empty() {
        let text = budget(&parts.join("\n"), max_tokens, &mut d);
        blocks.push(ContentBlock::text(text));
    }
    ToolOutput {
        content: blocks,
        details: Some(d),
        is_error: failed,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(out: &ToolOutput) -> Vec<String> {
        out.content
            .iter()
            .map(|b| match b {
                ContentBlock::Text(t) => t.text.clone(),
                _ => "<image>".into(),
            })
            .collect()
    }

    #[test]
    fn output_is_formatted_as_pi_formats_it() {
        let o = Outcome {
            failure: None,
            items: vec![
                Item::Console("hi 1 {\"a\":2}".into()),
                Item::Text("first".into()),
                Item::Text("{\"x\":1}".into()),
                Item::Text("[1,2]".into()),
            ],
            writes: None,
        };
        let r = result(&o, &[], Duration::from_millis(680), 10_000, None);
        assert_eq!(
            texts(&r),
            [
                "Script completed\nWall time 0.7 seconds\nOutput:\n",
                "==> text 1/3 <==\nfirst\n==> text 2/3 <==\n{\"x\":1}\n==> text 3/3 <==\n[1,2]\n<console_output>\nhi 1 {\"a\":2}\n</console_output>"
            ]
        );
        assert_eq!(r.details, Some(json!({"calls": []})));
        let failed = Outcome {
            failure: Some(Failure::Script("Error: boom".into())),
            items: vec![],
            writes: None,
        };
        let r = result(&failed, &[], Duration::from_millis(10), 10_000, None);
        assert!(r.is_error);
        assert_eq!(
            texts(&r)[1],
            "Script error:\nError: boom\n\nNo tool calls were made."
        );
        let empty = Outcome {
            failure: None,
            items: vec![],
            writes: None,
        };
        assert_eq!(
            result(&empty, &[], Duration::ZERO, 10_000, None)
                .content
                .len(),
            1
        );
        let long = Outcome {
            failure: None,
            items: vec![Item::Text("x".repeat(200))],
            writes: None,
        };
        let r = result(&long, &[], Duration::ZERO, 10, None);
        let t = &texts(&r)[1];
        assert!(t.starts_with("Warning: truncated output (original token count: 50)\nTotal output lines: 1\n\nxxxxxxxxxxxxxxxxxxxx…40 tokens truncated…xxxxxxxxxxxxxxxxxxxx\n\n[Full output: "), "{t}");
        let path = r.details.unwrap()["fullOutputPath"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "x".repeat(200));
        let _ = std::fs::remove_file(path);
    }
}
