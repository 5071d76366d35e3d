//! Session files, everything above the wire format: the [`Session`] type,
//! reading files (with migration and damage reports) and writing them
//! (locked appends, atomic new files), the entry tree and the context a
//! model sees, compaction and branch summaries, forks, which session a run
//! opens, and the fast listing, search, statistics and descriptions the
//! `pi-session` commands print.

pub mod branch_summary;
pub mod compact;
pub mod context;
pub mod describe;
pub mod diagnostics;
pub mod export;
pub mod file;
pub mod fork;
pub mod html;
pub mod ids;
pub mod lines;
pub mod list;
pub mod llm;
pub mod load;
pub mod open;
pub mod prefixes;
pub mod resolve;
pub mod runs;
pub mod search;
// `session::session` holds the type the module is named after.
#[allow(clippy::module_inception)]
pub mod session;
pub mod stats;
pub mod store;
pub mod stored;
pub mod tool_selection;
pub mod tree;
pub mod usage_scan;
mod user_text;
pub mod write;

pub use diagnostics::{Diagnostic, Diagnostics};
pub use load::LoadError;
pub use session::Session;
