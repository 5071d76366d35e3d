//! Session files: loading (with migration and damage reports), the entry
//! tree, LLM context building, fast listing, safe appends and edits.

pub mod branch_summary;
pub mod compact;
pub mod compact_plan;
pub mod context;
pub mod export;
pub mod file;
pub mod ids;
pub mod list;
pub mod llm;
pub mod load;
pub mod resolve;
pub mod stats;
pub mod store;
pub mod stored;
pub mod tool_selection;
pub mod tree;
pub mod write;

pub use load::{Diagnostic, Diagnostics, LoadError, Session};
