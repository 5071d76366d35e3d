//! What pi 1.6.0's built-in `mcp` extension tells the user outside the
//! TUI, rendered from the manager's state: the start-up notice when
//! config entries are wrong or servers failed (`MCP servers need
//! attention: … Run /mcp to fix.`), and the `/mcp` command's status, one
//! line per server then the config errors. Kept apart from the manager so
//! the RPC server (and any later front end) shows the same text. A
//! `codemode` server cannot match pi here (this toolkit serves its tools as
//! `deferred`, issue 13): its exposure reads
//! `deferred; codemode is not supported here`.

use std::path::Path;
use std::time::Duration;

use super::config::Exposure;
use super::{Mcp, State};

/// The `get_commands` entry of the built-in command (pi lists it while MCP
/// is on, before extension commands).
pub const COMMAND_NAME: &str = "mcp";
/// Its description as pi's `get_commands` gives it.
pub const COMMAND_DESCRIPTION: &str =
    "Manage MCP servers: sign in, reconnect, enable or disable, and change exposure";

/// pi's answer to a `/mcp` sub-command it does not know.
pub const USAGE: &str =
    "Usage: /mcp, /mcp login [server], /mcp logout [server], /mcp reconnect [server]";

/// What a prompt asks of the built-in command; the actions carry the
/// server named, if any ([`super::command`] performs them).
#[derive(Debug, PartialEq, Eq)]
pub enum McpCommand {
    /// `/mcp`: the status lines.
    Status,
    /// `/mcp login [server]`.
    Login(Option<String>),
    /// `/mcp logout [server]`.
    Logout(Option<String>),
    /// `/mcp reconnect [server]`.
    Reconnect(Option<String>),
    /// Anything else after `/mcp` (another word, or more than one server).
    Usage,
}

/// `Some` when `text` is the `/mcp` command (`/mcp`, `/mcp <args>`).
pub fn parse_command(text: &str) -> Option<McpCommand> {
    let rest = text.trim().strip_prefix("/mcp")?;
    if !rest.is_empty() && !rest.starts_with(char::is_whitespace) {
        return None;
    }
    let words: Vec<&str> = rest.split_whitespace().collect();
    let server = match words.len() {
        0 => return Some(McpCommand::Status),
        1 => None,
        2 => Some(words[1].to_string()),
        _ => return Some(McpCommand::Usage),
    };
    Some(match words[0] {
        "login" => McpCommand::Login(server),
        "logout" => McpCommand::Logout(server),
        "reconnect" => McpCommand::Reconnect(server),
        _ => McpCommand::Usage,
    })
}

/// The `/mcp` command a prompt is (a user message whose text is
/// `/mcp…`), if it is one.
pub fn command_of(m: &crate::format::AgentMessage) -> Option<McpCommand> {
    match m {
        crate::format::AgentMessage::User(u) => parse_command(&u.content.joined_text("\n")),
        _ => None,
    }
}

/// Waits until no enabled server is connecting, as `/mcp` waits for
/// pending connections: a connection attempt ends by itself (each of its
/// requests has the server's `timeout`: a stalled `initialize` fails with
/// `MCP request timed out after <ms>ms`), so the wait is bounded only as
/// a safeguard, at two timeouts (the handshake and `tools/list`) plus
/// [`SETTLE_MARGIN`] for starting the process or fetching a token.
pub async fn settle(mcp: &Mcp) {
    let waits = mcp
        .servers
        .iter()
        .filter(|s| s.cfg.enabled)
        .map(|s| s.settled(s.cfg.timeout * 2 + SETTLE_MARGIN));
    futures_util::future::join_all(waits).await;
}

/// See [`settle`].
pub const SETTLE_MARGIN: Duration = Duration::from_secs(10);

/// A server's exposure as the status shows it: pi's word.
fn exposure_text(e: Exposure) -> String {
    e.as_str().to_string()
}

/// The start-up notice (pi's `notify` warning), when a config entry is
/// wrong or a server failed to connect; `None` when all is well. Call it
/// once the servers settled ([`settle`]).
pub fn attention(mcp: &Mcp) -> Option<String> {
    let mut lines: Vec<String> = mcp
        .config
        .errors
        .iter()
        .map(|e| format!("  config: {e}"))
        .collect();
    for s in mcp.servers.iter().filter(|s| s.cfg.enabled) {
        match s.state() {
            State::Failed(e) => lines.push(format!("  {}: failed: {e}", s.cfg.name)),
            State::NeedsAuth(_) => lines.push(format!("  {}: needs sign-in", s.cfg.name)),
            _ => {}
        }
    }
    if lines.is_empty() {
        return None;
    }
    Some(format!(
        "MCP servers need attention:\n{}\nRun /mcp to fix.",
        lines.join("\n")
    ))
}

/// The `/mcp` status: one line per configured server in config order
/// (`<name>: connected, <n> tools (<exposure>)`, hidden tools counted;
/// `disabled`; `failed` with the reason indented below; `needs sign-in,
/// run /mcp login <name>`; `connecting` only if the safeguard of [`settle`]
/// ran out, which pi never shows), then `config error: <error>` lines. With nothing
/// configured, pi's hint naming `<agent_dir>/mcp.json`.
pub fn report(mcp: Option<&Mcp>, agent_dir: &Path) -> String {
    let empty = mcp.is_none_or(|m| m.servers.is_empty() && m.config.errors.is_empty());
    let Some(mcp) = mcp.filter(|_| !empty) else {
        return format!(
            "No MCP servers configured. Add them to {} or .pi/mcp.json.",
            agent_dir.join("mcp.json").display()
        );
    };
    let mut lines = Vec::new();
    for s in &mcp.servers {
        let name = &s.cfg.name;
        let exp = exposure_text(s.cfg.exposure);
        lines.push(match s.state() {
            State::Connected(c) => {
                format!("{name}: connected, {} tools ({exp})", c.tools.len())
            }
            State::Disabled => format!("{name}: disabled ({exp})"),
            State::Failed(e) => format!("{name}: failed ({exp})\n    {e}"),
            State::NeedsAuth(_) => {
                format!("{name}: needs sign-in, run /mcp login {name} ({exp})")
            }
            State::Connecting => format!("{name}: connecting ({exp})"),
        });
    }
    for e in &mcp.config.errors {
        lines.push(format!("config error: {e}"));
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::config::McpConfig;

    fn config(json: &str) -> (tempfile::TempDir, McpConfig) {
        let dir = tempfile::tempdir().unwrap();
        let agent = dir.path().join("agent");
        std::fs::create_dir_all(&agent).unwrap();
        std::fs::write(agent.join("mcp.json"), json).unwrap();
        let cfg = crate::mcp::config::load(&agent, dir.path(), false);
        (dir, cfg)
    }

    #[test]
    fn parse_command_takes_only_the_mcp_word() {
        assert_eq!(parse_command("/mcp"), Some(McpCommand::Status));
        assert_eq!(parse_command("  /mcp  "), Some(McpCommand::Status));
        assert_eq!(parse_command("/mcp list"), Some(McpCommand::Usage));
        assert_eq!(
            parse_command("/mcp login  srv "),
            Some(McpCommand::Login(Some("srv".into())))
        );
        assert_eq!(parse_command("/mcp logout"), Some(McpCommand::Logout(None)));
        assert_eq!(
            parse_command("/mcp reconnect"),
            Some(McpCommand::Reconnect(None))
        );
        assert_eq!(parse_command("/mcp reconnect a b"), Some(McpCommand::Usage));
        assert_eq!(parse_command("/mcpx"), None);
        assert_eq!(parse_command("use /mcp"), None);
    }

    #[tokio::test]
    async fn disabled_servers_and_config_errors_are_listed_in_order() {
        let (dir, cfg) = config(
            r#"{"mcpServers": {"off": {"command": "x", "enabled": false},
                "plain": {"command": "x", "enabled": false, "exposure": "direct"},
                "bad name!": {"command": "x"}}}"#,
        );
        let mcp = Mcp::start(cfg, dir.path());
        settle(&mcp).await;
        let path = dir.path().join("agent/mcp.json");
        let err = format!(
            "{}: invalid server name \"bad name!\" (use letters, digits, \"_\" and \"-\")",
            path.display()
        );
        assert_eq!(
            report(Some(&mcp), dir.path()),
            format!("off: disabled (codemode)\nplain: disabled (direct)\nconfig error: {err}")
        );
        assert_eq!(
            attention(&mcp),
            Some(format!(
                "MCP servers need attention:\n  config: {err}\nRun /mcp to fix."
            ))
        );
    }

    #[tokio::test]
    async fn a_failed_server_is_in_the_notice_and_the_status() {
        let (dir, cfg) = config(
            r#"{"mcpServers": {"gone": {"command": "/nonexistent/pi-toolkit-x", "exposure": "direct"}}}"#,
        );
        let mcp = Mcp::start(cfg, dir.path());
        settle(&mcp).await;
        let notice = attention(&mcp).unwrap_or_default();
        assert!(
            notice.starts_with("MCP servers need attention:\n  gone: failed: ")
                && notice.ends_with("\nRun /mcp to fix."),
            "{notice}"
        );
        let status = report(Some(&mcp), dir.path());
        assert!(
            status.starts_with("gone: failed (direct)\n    "),
            "{status}"
        );
        mcp.shutdown().await;
    }

    #[tokio::test]
    async fn a_server_needing_sign_in_says_how() {
        let (dir, cfg) = config(
            r#"{"mcpServers": {"web": {"url": "http://127.0.0.1:9/mcp", "exposure": "direct"}}}"#,
        );
        let mcp = Mcp::start(cfg, dir.path());
        settle(&mcp).await;
        let web = mcp.server("web").map(std::sync::Arc::clone).unwrap();
        mcp.disconnect(&web, State::NeedsAuth("signed out".into()))
            .await;
        assert_eq!(
            report(Some(&mcp), dir.path()),
            "web: needs sign-in, run /mcp login web (direct)"
        );
        assert_eq!(
            attention(&mcp).as_deref(),
            Some("MCP servers need attention:\n  web: needs sign-in\nRun /mcp to fix.")
        );
    }

    #[test]
    fn nothing_configured_names_the_files() {
        let dir = Path::new("/a/agent");
        assert_eq!(
            report(None, dir),
            "No MCP servers configured. Add them to /a/agent/mcp.json or .pi/mcp.json."
        );
    }
}
