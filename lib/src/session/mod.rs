//! Session files: loading (with migration and damage reports), the entry
//! tree, LLM context building, fast listing, safe appends and edits.

pub mod branch_summary;
pub mod compact;
pub mod context;
pub mod diagnostics;
pub mod export;
pub mod file;
pub mod ids;
pub mod lines;
pub mod list;
pub mod llm;
pub mod load;
pub mod resolve;
// `session::session` holds the type the module is named after.
#[allow(clippy::module_inception)]
pub mod session;
pub mod stats;
pub mod store;
pub mod stored;
pub mod tool_selection;
pub mod tree;
pub mod usage_scan;
pub mod write;

pub use diagnostics::{Diagnostic, Diagnostics};
pub use load::LoadError;
pub use session::Session;
