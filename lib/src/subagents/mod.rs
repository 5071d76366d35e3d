//! Built-in subagents (pi-web's "built-in sub-agents", seed 001): the
//! fail-closed global switch in `<agentDir>/agents/settings.json`
//! ([`settings`]), the agent profiles a parent may delegate to ([`profiles`]),
//! and (to come) the model-facing control tools, the child-session runtime,
//! `input_files` and the suppression of the legacy `pi-subagents`
//! extension. It sits above `agent/`,
//! `extensions/` and `session/` and writes pi-web-compatible files, so pi-web
//! and the toolkit can read each other's settings and profiles; the binaries
//! only parse flags and print what this module decides.

pub mod profiles;
pub mod settings;

/// The control tools the built-in registers, in registration order. No
/// child ever gets them (no nested delegation), and a legacy extension
/// registering any of them is suppressed while the built-in is on.
pub const CONTROL_TOOL_NAMES: [&str; 3] = ["Agent", "get_subagent_result", "steer_subagent"];

/// Whether `name` is one of the reserved control tools.
pub fn is_control_tool(name: &str) -> bool {
    CONTROL_TOOL_NAMES.contains(&name)
}
