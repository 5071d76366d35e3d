//! The `mcp_servers` system-prompt section: the enabled servers whose
//! tools are not declared one by one (deferred or codemode exposure), what
//! each offers, sorted by name and capped in size.

use std::sync::Arc;

use super::{Exposure, Server};

/// The section's size cap.
const SECTION_MAX: usize = 4096;

/// The `mcp_servers` section for the enabled servers with a deferred or
/// codemode exposure, sorted by name.
pub fn servers_section(servers: &[Arc<Server>]) -> Option<String> {
    let mut list: Vec<&Arc<Server>> = servers.iter().filter(|s| s.reached_indirectly()).collect();
    if list.is_empty() {
        return None;
    }
    list.sort_by(|a, b| crate::tools::ls::locale_cmp(&a.cfg.name, &b.cfg.name));
    // A server is reached from codemode scripts when one of its configured
    // exposures is `codemode`, else with `tool_search`.
    let reach = |s: &Server| {
        if s.cfg.exposures().contains(&Exposure::Codemode) {
            "codemode"
        } else {
            "tool_search"
        }
    };
    let mut intro = String::from("MCP servers whose tools are not declared to you.");
    if list.iter().any(|s| reach(s) == "codemode") {
        intro.push_str(" Call the tools of `codemode` servers from codemode scripts.");
    }
    if list.iter().any(|s| reach(s) == "tool_search") {
        intro.push_str(" Load the tools of `tool_search` servers with `tool_search`.");
    }
    let mut lines: Vec<String> = Vec::new();
    let mut used = intro.len();
    let total = list.len();
    for (i, s) in list.iter().enumerate() {
        let summary = s
            .cfg
            .description
            .as_deref()
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .map(str::to_string)
            .or_else(|| {
                s.meta()
                    .and_then(|m| m.instructions)
                    .map(|t| t.trim().to_string())
            })
            .and_then(|t| t.lines().next().map(str::to_string))
            .filter(|t| !t.is_empty());
        let remaining = SECTION_MAX.saturating_sub(used);
        let share = remaining / (total - i).max(1);
        let limit = share.min(250);
        let mut line = format!("- {} ({})", s.cfg.namespace(), reach(s));
        if let Some(sum) = summary {
            let cut = if sum.chars().count() > limit {
                let mut c: String = sum.chars().take(limit.saturating_sub(1)).collect();
                c.push('…');
                c
            } else {
                sum
            };
            line.push_str(": ");
            line.push_str(&cut);
        }
        if used + 1 + line.len() > SECTION_MAX {
            let more = total - i;
            lines.push(format!(
                "- … {more} more server(s); find their tools with searchTools()"
            ));
            break;
        }
        used += 1 + line.len();
        lines.push(line);
    }
    Some(crate::prompt::wrap(
        "mcp_servers",
        &format!("{intro}\n{}", lines.join("\n")),
    ))
}
