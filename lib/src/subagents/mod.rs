//! Built-in subagents (pi-web's "built-in sub-agents"): the
//! fail-closed global switch in `<agentDir>/agents/settings.json`
//! ([`settings`]), the agent profiles a parent may delegate to ([`profiles`]),
//! the model-facing control tools' definitions and result texts
//! ([`tools`]), the `input_files` preparation ([`input`]) and the
//! suppression of the legacy `pi-subagents` extension ([`legacy`]), the
//! child runtime ([`runtime`], running each child in `child`), reading
//! children back ([`runs`]) and
//! worktree isolation ([`worktree`]). It sits above `agent/`,
//! `extensions/` and `session/` and writes pi-web-compatible files, so pi-web
//! and the toolkit can read each other's settings and profiles; the binaries
//! only parse flags and print what this module decides.

mod child;
mod control;
pub mod input;
pub mod legacy;
pub mod profiles;
mod resume;
pub mod runs;
pub mod runtime;
pub mod settings;
pub mod tools;
pub mod worktree;

/// The control tools the built-in registers, in registration order. No
/// child ever gets them (no nested delegation), and a legacy extension
/// registering any of them is suppressed while the built-in is on.
pub const CONTROL_TOOL_NAMES: [&str; 3] = ["Agent", "get_subagent_result", "steer_subagent"];

/// Whether `name` is one of the reserved control tools.
pub fn is_control_tool(name: &str) -> bool {
    CONTROL_TOOL_NAMES.contains(&name)
}
