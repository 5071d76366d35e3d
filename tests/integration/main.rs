//! Integration tests: the real binaries, driven the way users drive them,
//! against fixtures the real pi wrote and, where installed, the real pi.

mod autocompact;
mod bad_input;
mod cli_docs;
mod common;
mod compact;
mod docs;
mod ext_node;
mod extensions;
mod extensions_hard;
mod extensions_ts;
mod hostile;
mod mcp;
mod peers;
mod pi_compat;
mod pi_flags;
mod prompt;
mod providers_vs_pi;
mod resources;
mod roundtrip;
mod rpc;
mod run;
mod run_vs_pi;
mod session_cmds;
mod session_store;
mod stdio;
mod subagent_limits;
mod subagents;
mod tool_set;
