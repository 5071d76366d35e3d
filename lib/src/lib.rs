//! The shared library of the pi toolkit.
//!
//! Every on-disk and on-the-wire format of pi lives in [`format`]; every piece
//! of logic the four binaries share lives in the sibling modules. The binaries
//! (`pi-session`, `pi-run`, `pi-resources`, `pi-prompt`) are thin clients: they
//! parse arguments, call into this crate and print records.
//!
//! [`format`] depends on serde only (no async runtime, no HTTP), so it could be
//! lifted into its own crate unchanged.

pub mod agent;
pub mod atomic_file;
pub mod capped_lines;
pub mod cli;
pub mod codemode;
pub mod extensions;
pub mod format;
pub mod interrupt;
pub mod mcp;
pub mod model;
pub mod paths;
pub mod piped;
pub mod process_group;
pub mod prompt;
pub mod provider;
pub mod regular_file;
pub mod resources;
pub mod rpc;
pub mod run;
pub mod sandbox;
pub mod session;
pub mod settings;
pub mod sizefmt;
pub mod subagents;
pub mod terminal;
pub mod timefmt;
pub mod tools;
pub mod trust;
