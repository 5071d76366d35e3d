//! MCP tools as agent tools: one per server tool (`mcp__<server>__<tool>`)
//! and the three resource tools. Results follow pi 1.6.0: the server's
//! content (text past 20 KiB keeps its head and tail around `…N chars
//! truncated…`, the whole text goes to a private temp file), `details:
//! {server, tool}`, the whole `CallToolResult` as `structuredContent`;
//! `isError` and JSON-RPC errors are error results.

use std::io::Write as _;
use std::sync::Arc;

use rmcp::model::{
    ClientRequest, ListResourceTemplatesRequest, ListResourcesRequest, PaginatedRequestParams,
    ReadResourceRequest, ReadResourceRequestParams,
};
use serde_json::{json, Map, Value};

use super::{Exposure, Mcp, Server, State};
use crate::format::message::ImageBlock;
use crate::format::tool::ToolDefinition;
use crate::format::ContentBlock;
use crate::tools::{Tool, ToolContext, ToolFuture, ToolOutput, UpdateSink};

/// Text past this many characters loses its middle.
pub const MAX_TEXT: usize = 20 * 1024;

/// One server tool.
pub struct McpTool {
    server: Arc<Server>,
    name: String,
    tool: String,
    description: String,
    schema: Value,
    /// The tool's own `outputSchema` (its `structuredContent`).
    output: Option<Value>,
}

/// What a script's call of an MCP tool resolves to: the `CallToolResult`,
/// its `structuredContent` typed by the tool's output schema.
fn call_result_schema(structured: Option<&Value>) -> Value {
    json!({"type": "object", "required": ["content"], "properties": {
        "content": {"type": "array", "items": {"type": "object", "required": ["type"], "properties": {
            "type": {"enum": ["text", "image", "audio", "resource_link", "resource"]},
            "text": {"type": "string"},
            "data": {"type": "string"},
            "mimeType": {"type": "string"}
        }, "additionalProperties": true}},
        "structuredContent": structured.cloned().unwrap_or(json!({})),
        "isError": {"type": "boolean"}
    }, "additionalProperties": true})
}

impl McpTool {
    pub fn new(server: Arc<Server>, name: String, t: &rmcp::model::Tool) -> McpTool {
        McpTool {
            server,
            name,
            tool: t.name.to_string(),
            description: t.description.as_deref().unwrap_or("").to_string(),
            schema: Value::Object((*t.input_schema).clone()),
            output: t
                .output_schema
                .as_ref()
                .map(|o| Value::Object((**o).clone())),
        }
    }
}

fn error_output(text: impl Into<String>) -> ToolOutput {
    ToolOutput {
        details: Some(json!({})),
        ..ToolOutput::error(text)
    }
}

impl Tool for McpTool {
    fn name(&self) -> std::borrow::Cow<'_, str> {
        self.name.as_str().into()
    }
    fn output_schema(&self) -> Option<Value> {
        Some(call_result_schema(self.output.as_ref()))
    }
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: self.name.clone(),
            description: self.description.clone(),
            parameters: self.schema.clone(),
            extra: Map::new(),
        }
    }
    fn execute<'a>(
        &'a self,
        args: Value,
        ctx: ToolContext,
        mut on_update: UpdateSink,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            let conn = match self.server.connection().await {
                Ok(c) => c,
                Err(e) => return error_output(e),
            };
            // Each progress notification is a partial result (pi's
            // `tool_execution_update`): its text and the call's details.
            let details = json!({"server": self.server.cfg.name, "tool": self.tool});
            let mut progress = |p: super::client::Progress| {
                on_update(ToolOutput {
                    content: vec![ContentBlock::text(p.text())],
                    details: Some(details.clone()),
                    ..Default::default()
                })
            };
            match conn
                .call_tool(&self.tool, args, &ctx.cancel, &mut progress)
                .await
            {
                Ok(result) => call_output(&self.server.cfg.name, &self.tool, result),
                Err(e) => error_output(conn.failure(&e)),
            }
        })
    }
}

/// pi's texts: a JSON-RPC error's own message, `MCP connection closed`
/// when the server went away.
pub(super) fn rpc_error_text(e: &str, closed: bool) -> String {
    if closed || e.contains("Transport closed") || e.contains("transport closed") {
        return "MCP connection closed".into();
    }
    // rmcp: "Mcp error: -32602: Unknown tool: add"
    match e.strip_prefix("Mcp error: ") {
        Some(rest) => match rest.split_once(": ") {
            Some((code, msg))
                if code
                    .trim_start_matches('-')
                    .chars()
                    .all(|c| c.is_ascii_digit()) =>
            {
                msg.to_string()
            }
            _ => rest.to_string(),
        },
        None => e.to_string(),
    }
}

/// The agent's view of one `CallToolResult`.
fn call_output(server: &str, tool: &str, result: Value) -> ToolOutput {
    let is_error = result
        .get("isError")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let items = result
        .get("content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut details = json!({"server": server, "tool": tool});
    let content = blocks(&items, &mut details);
    let mut structured = Map::new();
    structured.insert("content".into(), Value::Array(items));
    if let Some(s) = result.get("structuredContent") {
        structured.insert("structuredContent".into(), s.clone());
    }
    if result.get("isError").is_some() {
        structured.insert("isError".into(), Value::Bool(is_error));
    }
    ToolOutput {
        content,
        details: Some(details),
        is_error,
        structured: Some(Value::Object(structured)),
        flag_error: is_error,
    }
}

/// MCP content items as content blocks (text is truncated, images kept,
/// anything else as its JSON).
fn blocks(items: &[Value], details: &mut Value) -> Vec<ContentBlock> {
    let mut out = Vec::new();
    for it in items {
        match it.get("type").and_then(Value::as_str) {
            Some("text") => {
                let text = it.get("text").and_then(Value::as_str).unwrap_or("");
                out.push(ContentBlock::text(truncate(text, details)));
            }
            Some("image") => {
                if let (Some(data), Some(mime)) = (
                    it.get("data").and_then(Value::as_str),
                    it.get("mimeType").and_then(Value::as_str),
                ) {
                    out.push(ContentBlock::Image(ImageBlock {
                        data: data.to_string(),
                        mime_type: mime.to_string(),
                        extra: Map::new(),
                    }));
                }
            }
            Some("resource") => {
                let text = it
                    .pointer("/resource/text")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| it.to_string());
                out.push(ContentBlock::text(truncate(&text, details)));
            }
            _ => out.push(ContentBlock::text(it.to_string())),
        }
    }
    out
}

/// Keeps the first and last 10 KiB characters of a long text; the whole
/// text goes to `/tmp/pi-mcp-<hex>.txt` (mode 0600), named in the text and
/// in `details.fullOutputPath`.
pub fn truncate(text: &str, details: &mut Value) -> String {
    let n = text.chars().count();
    if n <= MAX_TEXT {
        return text.to_string();
    }
    let half = MAX_TEXT / 2;
    let head: String = text.chars().take(half).collect();
    let tail: String = text.chars().skip(n - half).collect();
    let lines = text.split('\n').count();
    let mut out = format!(
        "Warning: truncated output (original token count: {})\nTotal output lines: {lines}\n\n{head}…{} chars truncated…{tail}",
        n.div_ceil(4),
        n - 2 * half
    );
    if let Some(path) = save_full(text) {
        out.push_str(&format!(
            "\n\n[Full output: {} (read it with offset/limit)]",
            path.display()
        ));
        if let Value::Object(m) = details {
            m.insert("fullOutputPath".into(), path.display().to_string().into());
        }
    }
    out
}

fn save_full(text: &str) -> Option<std::path::PathBuf> {
    let hex = format!("{:016x}", rand_u64());
    let path = std::env::temp_dir().join(format!("pi-mcp-{hex}.txt"));
    let mut f = std::fs::OpenOptions::new();
    f.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut f, 0o600);
    let mut file = f.open(&path).ok()?;
    file.write_all(text.as_bytes()).ok()?;
    Some(path)
}

fn rand_u64() -> u64 {
    let u = uuid::Uuid::new_v4();
    let b = u.as_bytes();
    u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
}

/// Which resource tool.
#[derive(Clone, Copy)]
enum ResourceKind {
    List,
    Templates,
    Read,
}

/// `list_mcp_resources`, `list_mcp_resource_templates`, `read_mcp_resource`.
pub struct ResourceTool {
    mcp: Arc<Mcp>,
    kind: ResourceKind,
}

/// The three resource tools.
pub fn resource_tools(mcp: Arc<Mcp>) -> Vec<Arc<dyn Tool>> {
    [
        ResourceKind::List,
        ResourceKind::Templates,
        ResourceKind::Read,
    ]
    .into_iter()
    .map(|kind| {
        Arc::new(ResourceTool {
            mcp: Arc::clone(&mcp),
            kind,
        }) as Arc<dyn Tool>
    })
    .collect()
}

fn list_params() -> Value {
    json!({"type": "object", "properties": {
        "server": {"type": "string", "description": "MCP server name. Omit to list every server with resources."},
        "cursor": {"type": "string", "description": "Opaque cursor from a previous call with the same server; omit for the first page."}
    }, "additionalProperties": false})
}

impl ResourceTool {
    fn name(&self) -> &'static str {
        match self.kind {
            ResourceKind::List => "list_mcp_resources",
            ResourceKind::Templates => "list_mcp_resource_templates",
            ResourceKind::Read => "read_mcp_resource",
        }
    }

    /// The servers with resources that are not hidden.
    fn resource_servers(&self) -> Vec<Arc<Server>> {
        self.mcp
            .servers
            .iter()
            .filter(|s| s.cfg.enabled && s.cfg.exposure != Exposure::Hidden)
            .filter(|s| matches!(s.state(), State::Connected(c) if c.has_resources))
            .cloned()
            .collect()
    }

    async fn run(&self, args: Value, ctx: ToolContext) -> ToolOutput {
        let wanted = args
            .get("server")
            .and_then(Value::as_str)
            .map(str::to_string);
        let servers: Vec<Arc<Server>> = match &wanted {
            Some(n) => match self
                .resource_servers()
                .into_iter()
                .find(|s| &s.cfg.name == n)
            {
                Some(s) => vec![s],
                None => return error_output(format!("Unknown MCP server with resources: {n}")),
            },
            None => self.resource_servers(),
        };
        let details = |server: &str| json!({"server": server, "tool": self.name()});
        match self.kind {
            ResourceKind::Read => {
                let Some(server) = servers.first() else {
                    return error_output("read_mcp_resource needs a server");
                };
                let uri = args
                    .get("uri")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let conn = match server.connection().await {
                    Ok(c) => c,
                    Err(e) => return error_output(e),
                };
                let req = ClientRequest::ReadResourceRequest(ReadResourceRequest::new(
                    ReadResourceRequestParams::new(uri.clone()),
                ));
                match conn.request(req, &ctx.cancel, &mut |_| {}).await {
                    Ok(r) => {
                        let v = serde_json::to_value(r).unwrap_or(Value::Null);
                        let contents = v.get("contents").cloned().unwrap_or(Value::Array(vec![]));
                        let mut d = details(&server.cfg.name);
                        let text: Vec<String> = contents
                            .as_array()
                            .map(|a| {
                                a.iter()
                                    .map(|c| match c.get("text").and_then(Value::as_str) {
                                        Some(t) => t.to_string(),
                                        None => c.to_string(),
                                    })
                                    .collect()
                            })
                            .unwrap_or_default();
                        let text = truncate(&text.join("\n"), &mut d);
                        ToolOutput {
                            content: vec![ContentBlock::text(text)],
                            details: Some(d),
                            structured: Some(
                                json!({"server": server.cfg.name, "uri": uri, "contents": contents}),
                            ),
                            ..Default::default()
                        }
                    }
                    Err(e) => error_output(conn.failure(&e)),
                }
            }
            ResourceKind::List | ResourceKind::Templates => {
                let cursor = args
                    .get("cursor")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                let mut all = Vec::new();
                for s in &servers {
                    let conn = match s.connection().await {
                        Ok(c) => c,
                        Err(e) => return error_output(e),
                    };
                    let params = PaginatedRequestParams::default().with_cursor(cursor.clone());
                    let (req, key) = match self.kind {
                        ResourceKind::List => (
                            ClientRequest::ListResourcesRequest(ListResourcesRequest::with_param(
                                params,
                            )),
                            "resources",
                        ),
                        _ => (
                            ClientRequest::ListResourceTemplatesRequest(
                                ListResourceTemplatesRequest::with_param(params),
                            ),
                            "resourceTemplates",
                        ),
                    };
                    match conn.request(req, &ctx.cancel, &mut |_| {}).await {
                        Ok(r) => {
                            let v = serde_json::to_value(r).unwrap_or(Value::Null);
                            for item in v.get(key).and_then(Value::as_array).into_iter().flatten() {
                                let mut item = item.clone();
                                if let Value::Object(m) = &mut item {
                                    m.insert("server".into(), s.cfg.name.clone().into());
                                }
                                all.push(item);
                            }
                        }
                        Err(e) => return error_output(conn.failure(&e)),
                    }
                }
                let key = match self.kind {
                    ResourceKind::List => "resources",
                    _ => "resourceTemplates",
                };
                let body = json!({ key: all });
                let mut d = details(wanted.as_deref().unwrap_or(""));
                let text = truncate(
                    &serde_json::to_string_pretty(&body).unwrap_or_default(),
                    &mut d,
                );
                ToolOutput {
                    content: vec![ContentBlock::text(text)],
                    details: Some(d),
                    structured: Some(body),
                    ..Default::default()
                }
            }
        }
    }
}

impl Tool for ResourceTool {
    fn output_schema(&self) -> Option<Value> {
        let s = |t: &str| json!({"type": "string", "description": t});
        let plain = json!({"type": "string"});
        let errors = json!({"type": "array", "description": "Servers that could not be listed", "items": {"type": "object", "required": ["server", "error"], "properties": {"server": plain, "error": plain}}});
        Some(match self.kind {
            ResourceKind::List => {
                json!({"type": "object", "required": ["resources"], "properties": {
                    "server": plain,
                    "resources": {"type": "array", "items": {"type": "object", "required": ["server", "uri", "name"], "properties": {
                        "server": plain, "uri": plain, "name": plain, "title": plain, "description": plain, "mimeType": plain, "size": {"type": "number"}
                    }}},
                    "nextCursor": plain,
                    "errors": errors
                }})
            }
            ResourceKind::Templates => {
                json!({"type": "object", "required": ["resourceTemplates"], "properties": {
                    "server": plain,
                    "resourceTemplates": {"type": "array", "items": {"type": "object", "required": ["server", "uriTemplate", "name"], "properties": {
                        "server": plain, "uriTemplate": s("RFC 6570 URI template"), "name": plain, "title": plain, "description": plain, "mimeType": plain
                    }}},
                    "nextCursor": plain,
                    "errors": errors
                }})
            }
            ResourceKind::Read => {
                json!({"type": "object", "required": ["server", "uri", "contents"], "properties": {
                    "server": plain,
                    "uri": plain,
                    "contents": {"type": "array", "items": {"anyOf": [
                        {"type": "object", "required": ["uri", "text"], "properties": {"uri": plain, "mimeType": plain, "text": plain}},
                        {"type": "object", "required": ["uri", "blob"], "properties": {"uri": plain, "mimeType": plain, "blob": s("base64")}}
                    ]}}
                }})
            }
        })
    }
    fn definition(&self) -> ToolDefinition {
        let (description, parameters) = match self.kind {
            ResourceKind::List => (
                "Lists resources provided by MCP servers. Resources allow servers to share data that provides context to language models, such as files, database schemas, or application-specific information. Prefer resources over web search when possible.",
                list_params(),
            ),
            ResourceKind::Templates => (
                "Lists resource templates provided by MCP servers. Parameterized resource templates allow servers to share data that takes parameters and provides context to language models, such as files, database schemas, or application-specific information. Prefer resource templates over web search when possible.",
                list_params(),
            ),
            ResourceKind::Read => (
                "Read a specific resource from an MCP server given the server name and resource URI.",
                json!({"type": "object", "properties": {
                    "server": {"type": "string", "description": "MCP server name exactly as configured. Must match the 'server' field returned by list_mcp_resources."},
                    "uri": {"type": "string", "description": "Resource URI to read. Must be one of the URIs returned by list_mcp_resources."}
                }, "required": ["server", "uri"], "additionalProperties": false}),
            ),
        };
        ToolDefinition {
            name: self.name().into(),
            description: description.into(),
            parameters,
            extra: Map::new(),
        }
    }
    fn execute<'a>(
        &'a self,
        args: Value,
        ctx: ToolContext,
        _on_update: UpdateSink,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            // Resource tools wait for every server.
            self.mcp.wait_all(std::time::Duration::from_secs(60)).await;
            self.run(args, ctx).await
        })
    }
}

/// `tool_search`: finds deferred MCP tools by words of their names and
/// descriptions and loads the best matches for the next model call.
pub struct ToolSearch {
    mcp: Arc<Mcp>,
}

impl ToolSearch {
    pub fn new(mcp: Arc<Mcp>) -> ToolSearch {
        ToolSearch { mcp }
    }
}

impl Tool for ToolSearch {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "tool_search".into(),
            description: "# Tool discovery\n\nSearches over deferred tool metadata with BM25 and exposes matching tools for the next model call.\n\nSome of the tools, such as tools of MCP servers, may not have been provided to you upfront, and you should use this tool (`tool_search`) to search for the required tools. For MCP tool discovery, always use `tool_search`.".into(),
            parameters: json!({"type": "object", "required": ["query"], "properties": {
                "query": {"type": "string", "description": "Search query for deferred tools."},
                "limit": {"type": "number", "description": "Maximum number of tools to return. Defaults to 8."}
            }}),
            extra: Map::new(),
        }
    }
    fn prompt_snippet(&self) -> Option<String> {
        Some("Search for tools that are not loaded yet and load the matches".into())
    }
    fn execute<'a>(
        &'a self,
        args: Value,
        _ctx: ToolContext,
        _on_update: UpdateSink,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            let query = args.get("query").and_then(Value::as_str).unwrap_or("");
            let limit = args
                .get("limit")
                .and_then(Value::as_f64)
                .filter(|l| *l >= 1.0)
                .map(|l| l as usize)
                .unwrap_or(8);
            // It may reach every deferred server: wait for them.
            let deferred: Vec<&Arc<Server>> = self
                .mcp
                .servers
                .iter()
                .filter(|s| s.reached_indirectly())
                .collect();
            for s in &deferred {
                let _ = s.connection().await;
            }
            let candidates = self.mcp.deferred_tools();
            let docs: Vec<Vec<String>> = candidates
                .iter()
                .map(|t| {
                    let d = t.definition();
                    let mut w = crate::codemode::catalog::words(&d.name);
                    w.extend(crate::codemode::catalog::words(&d.description));
                    w
                })
                .collect();
            let hits: Vec<Arc<dyn Tool>> = crate::codemode::catalog::rank(query, &docs)
                .into_iter()
                .take(limit)
                .map(|(i, _)| Arc::clone(&candidates[i]))
                .collect();
            let lines: Vec<String> = hits
                .iter()
                .map(|t| {
                    let d = t.definition();
                    format!(
                        "- {}: {}",
                        d.name,
                        d.description.lines().next().unwrap_or("")
                    )
                })
                .collect();
            let names: Vec<String> = hits.iter().map(|t| t.name().into_owned()).collect();
            if let Ok(mut inbox) = self.mcp.inbox.lock() {
                inbox.extend(hits);
            }
            let text = if lines.is_empty() {
                format!("No deferred tools match \"{query}\".")
            } else {
                format!("Loaded for the next call:\n{}", lines.join("\n"))
            };
            ToolOutput {
                content: vec![ContentBlock::text(text)],
                details: Some(json!({"query": query, "tools": names})),
                ..Default::default()
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_keeps_head_and_tail_like_pi() {
        let text: String = (0..30000)
            .map(|i| (b'a' + (i % 26) as u8) as char)
            .collect();
        let mut d = json!({"server": "fx", "tool": "big-text"});
        let out = truncate(&text, &mut d);
        let path = d["fullOutputPath"].as_str().unwrap().to_string();
        assert!(out.starts_with(
            "Warning: truncated output (original token count: 7500)\nTotal output lines: 1\n\n"
        ));
        assert!(out.contains("…9520 chars truncated…"));
        assert!(out.ends_with(&format!(
            "\n\n[Full output: {path} (read it with offset/limit)]"
        )));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        let _ = std::fs::remove_file(&path);
        let mut d2 = json!({});
        assert_eq!(truncate("short", &mut d2), "short");
        assert_eq!(d2, json!({}));
    }

    #[test]
    fn results_and_errors_as_pi_shapes_them() {
        let ok = call_output(
            "fx",
            "add",
            json!({"content":[{"type":"text","text":"42"}],"structuredContent":{"result":42},"isError":false}),
        );
        assert!(!ok.is_error);
        assert_eq!(ok.details, Some(json!({"server":"fx","tool":"add"})));
        assert_eq!(
            ok.structured,
            Some(
                json!({"content":[{"type":"text","text":"42"}],"structuredContent":{"result":42},"isError":false})
            )
        );
        let bad = call_output(
            "fx",
            "fail",
            json!({"content":[{"type":"text","text":"no"}],"isError":true}),
        );
        assert!(bad.is_error && bad.flag_error);
        assert_eq!(
            rpc_error_text("Mcp error: -32602: Unknown tool: add", false),
            "Unknown tool: add"
        );
        assert_eq!(rpc_error_text("anything", true), "MCP connection closed");
    }
}
