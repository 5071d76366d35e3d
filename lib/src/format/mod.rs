//! Wire types: pi's session entries, agent messages, content blocks and the
//! JSONL records this toolkit prints.
//!
//! Rules every type here follows, because the real pi reads what we write:
//! * field order is the order pi writes (serde serialises struct fields in
//!   declaration order, and `serde_json` is built with `preserve_order`);
//! * absent optional values are omitted, never written as `null`, unless pi
//!   itself writes `null` there (`parentId`);
//! * every struct carries an `extra` map that keeps fields this version does
//!   not know, and every enum has an `Unknown` variant that keeps the whole
//!   object, so a read → write round trip never loses data.

pub mod compaction;
pub mod entry;
pub mod extension;
pub mod message;
pub mod model;
pub mod num;
pub mod records;
pub mod resources;
pub mod rpc;
pub mod run_end;
pub mod subagent;
mod tagged;
pub mod tool;

pub use entry::{Entry, SessionHeader, CURRENT_SESSION_VERSION};
pub use message::{AgentMessage, ContentBlock, Cost, Usage, UserContent};
pub use num::Num;

/// The strings of a JSON array (other items skipped; not an array: none).
pub fn string_list(v: Option<&serde_json::Value>) -> Vec<String> {
    v.and_then(serde_json::Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(serde_json::Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}
