//! pi's MCP tool names: `mcp__<server>__<tool>`, every character outside
//! `[A-Za-z0-9_]` turned into `_`; a name past 64 characters, or one that
//! collides with a name already given, is cut and ends in `_` plus the
//! first 8 hex digits of `sha256(server \0 tool)`.

use sha2::{Digest, Sha256};

/// The longest tool name providers accept.
pub const MAX_NAME: usize = 64;

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `mcp__<server>` with every character outside `[A-Za-z0-9_]` as `_`.
pub fn namespace(server: &str) -> String {
    format!("mcp__{}", sanitize(server))
}

fn hashed(server: &str, tool: &str, base: &str) -> String {
    let mut h = Sha256::new();
    h.update(server.as_bytes());
    h.update([0u8]);
    h.update(tool.as_bytes());
    let hex: String = h.finalize()[..4]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let keep: String = base.chars().take(MAX_NAME - 1 - hex.len()).collect();
    format!("{keep}_{hex}")
}

/// The model-facing name of `tool` on `server`; `taken` holds the names
/// given so far (a collision gets the hashed form).
pub fn tool_name(server: &str, tool: &str, taken: &[String]) -> String {
    let base = format!("{}__{}", namespace(server), sanitize(tool));
    if base.len() > MAX_NAME || taken.contains(&base) {
        hashed(server, tool, &base)
    } else {
        base
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitises_cuts_and_hashes() {
        assert_eq!(
            tool_name("wx-direct", "get-weather", &[]),
            "mcp__wx_direct__get_weather"
        );
        assert_eq!(namespace("wx-def"), "mcp__wx_def");
        let long = "a".repeat(80);
        let n = tool_name("srv", &long, &[]);
        assert_eq!(n.len(), MAX_NAME);
        // sha256("srv\0" + 80 × "a"), first 4 bytes.
        let mut h = Sha256::new();
        h.update(format!("srv\0{long}").as_bytes());
        let hex: String = h.finalize()[..4]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            n,
            format!("mcp__srv__{}_{hex}", "a".repeat(MAX_NAME - 9 - 10))
        );
        // Two tools that sanitise alike: the second is hashed.
        let first = tool_name("s", "a-b", &[]);
        let second = tool_name("s", "a.b", std::slice::from_ref(&first));
        assert_eq!(first, "mcp__s__a_b");
        assert!(second.starts_with("mcp__s__a_b_") && second.len() == "mcp__s__a_b_".len() + 8);
    }
}
