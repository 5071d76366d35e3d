//! How the tools of a run come together beyond the built-in resolver:
//! extension tools join the set (one named like a built-in replaces it)
//! and the pool `setActiveTools` chooses from, and the MCP tools a server
//! brings later (after `/mcp reconnect` or a sign-in) pass the same
//! selection as the first ones.

use std::sync::Arc;

use crate::extensions::loader;
use crate::extensions::runner::Runner;
use crate::tools::select::{self, Pinned, Selection, ToolFlags};
use crate::tools::Tool;

/// Which MCP tools the run's tool selection admits (see
/// [`crate::mcp::command::Select`]).
pub type McpSelect = crate::mcp::command::Select;

/// The selection for MCP tools that arrive during the run: the same flags,
/// `defaultTools` and pin as the first resolution.
pub fn mcp_select(
    flags: ToolFlags,
    defaults: select::DefaultTools,
    pinned: Option<Pinned>,
) -> Arc<McpSelect> {
    Arc::new(move |now: &[Arc<dyn Tool>]| -> Vec<Arc<dyn Tool>> {
        let mut available = select::builtin_available();
        available.extend(crate::mcp::Mcp::available(now));
        let names = select::resolve(&flags, &defaults, pinned.as_ref(), &available)
            .map(|s| s.names)
            .unwrap_or_default();
        now.iter()
            .filter(|t| names.contains(&t.name().into_owned()))
            .cloned()
            .collect()
    })
}

/// Extension tools join the set as the tool flags decide (one named like a
/// built-in replaces it) and the pool `setActiveTools` chooses from; what
/// the flags shut out, `setActiveTools` cannot bring back. `late`: only
/// tools not in the pool yet (registered after load, e.g. in
/// `session_start`).
pub fn join_extension_tools(
    runner: &Arc<Runner>,
    tools: &mut Vec<Arc<dyn Tool>>,
    late: bool,
    sel: &mut Selection,
    prog: &str,
) {
    let names: Vec<String> = crate::tools::BUILTIN_TOOLS
        .iter()
        .map(|n| n.to_string())
        .collect();
    let mut pool = if late {
        runner.tool_pool()
    } else {
        select::builtin_tools(&names)
    };
    let known: Vec<String> = pool.iter().map(|t| t.name().into_owned()).collect();
    for (t, active) in loader::tools(runner, prog) {
        let name = t.name().into_owned();
        if late && known.contains(&name) {
            continue;
        }
        pool.retain(|b| b.name().into_owned() != name);
        pool.push(Arc::clone(&t));
        sel.add([select::AvailableTool::extension(&name, active)]);
        if sel.is_active(&name) {
            tools.retain(|b| b.name().into_owned() != name);
            tools.push(t);
        }
    }
    pool.retain(|t| sel.admits(&t.name()));
    runner.set_tool_pool(pool);
    // What getActiveTools/getAllTools answer in session_start.
    publish_tools(runner, tools);
}

/// Tells the extensions which tools are active (`getActiveTools`,
/// `getAllTools`).
pub fn publish_tools(runner: &Runner, tools: &[Arc<dyn Tool>]) {
    runner.set_tools(
        tools.iter().map(|t| t.name().into_owned()).collect(),
        tools
            .iter()
            .filter_map(|t| serde_json::to_value(t.definition()).ok())
            .collect(),
    );
}
