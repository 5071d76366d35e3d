//! The MCP servers as codemode sees them: every tool that is not hidden is
//! callable from scripts, grouped by its server's namespace (with the
//! configured description and the server's instructions), and a script
//! waits only for the servers it names (all of them when it lists or
//! searches tools).

use std::sync::{Arc, Weak};

use super::{Exposure, Mcp};
use crate::agent::hooks::BoxFuture;
use crate::codemode::{Catalog, Namespace};
use crate::tools::Tool;

/// The servers of one run (weakly held: the tool lives inside them).
pub struct McpCatalog(pub Weak<Mcp>);

fn namespace_of(s: &super::Server) -> Namespace {
    Namespace {
        name: s.cfg.namespace(),
        description: s
            .cfg
            .description
            .as_deref()
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .map(str::to_string),
        instructions: s.meta().and_then(|m| m.instructions),
    }
}

impl Catalog for McpCatalog {
    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.0
            .upgrade()
            .map(|m| m.script_tools())
            .unwrap_or_default()
    }

    fn namespace_of(&self, tool: &str) -> Option<Namespace> {
        let mcp = self.0.upgrade()?;
        let prefix = tool.strip_prefix("mcp__")?;
        mcp.servers
            .iter()
            .filter(|s| s.cfg.enabled)
            .find(|s| {
                let ns = s.cfg.namespace();
                let ns = ns.strip_prefix("mcp__").unwrap_or(&ns);
                prefix
                    .strip_prefix(ns)
                    .is_some_and(|rest| rest.starts_with("__"))
            })
            .map(|s| namespace_of(s))
    }

    fn namespaces(&self) -> Vec<Namespace> {
        let Some(mcp) = self.0.upgrade() else {
            return Vec::new();
        };
        mcp.servers
            .iter()
            .filter(|s| s.cfg.enabled && s.cfg.exposure != Exposure::Hidden)
            .map(|s| namespace_of(s))
            .collect()
    }

    fn ready<'a>(&'a self, code: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let Some(mcp) = self.0.upgrade() else {
                return;
            };
            let all = code.contains("ALL_TOOLS") || code.contains("searchTools");
            let waits = mcp
                .servers
                .iter()
                .filter(|s| s.cfg.enabled)
                .filter(|s| all || code.contains(&s.cfg.namespace()))
                .map(|s| s.settled(s.cfg.timeout));
            futures_util::future::join_all(waits).await;
        })
    }
}
