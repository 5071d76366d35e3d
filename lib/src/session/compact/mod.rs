//! Compaction of a session branch, as pi 1.6.0 does it, one concern a
//! file: the `compaction.*` settings ([`settings`]), the chars/4 token
//! estimate ([`estimate`]), the branch as the model sees it
//! ([`projection`]), the cut point and what it summarises ([`cut`]), the
//! files the summarised part touched ([`file_ops`]), the conversation as
//! text ([`serialize`]), the prompts and the summary call ([`prompts`],
//! [`summarize`]), the summary and the `compaction` entry ([`result`]),
//! the plan of a large file without loading it ([`plan`]), and the one
//! orchestration every caller goes through ([`run`]). The names callers
//! use are re-exported here.

pub mod command;
mod cut;
mod estimate;
mod file_ops;
pub mod plan;
mod projection;
mod prompts;
mod result;
pub mod run;
mod serialize;
mod settings;
mod summarize;

pub(crate) use cut::{find_cut, Cut, Kind};
pub use cut::{Preparation, PrepareError};
pub use estimate::{estimate_tokens, usage_tokens};
pub use file_ops::FileOps;
pub use projection::{ProjectedEntry, Projection};
pub use prompts::{
    BRANCH_PROMPT, INITIAL_PROMPT, SUMMARY_SYSTEM_PROMPT, TURN_PREFIX_PROMPT, UPDATE_PROMPT,
};
pub use result::{compact, CompactionResult};
pub use serialize::serialize_conversation;
pub(crate) use settings::safe_int;
pub use settings::{CompactionSettings, DEFAULT_KEEP_RECENT_TOKENS, DEFAULT_RESERVE_TOKENS};
pub use summarize::{reporting_retries, summarize, SummaryModel, SummaryText};
