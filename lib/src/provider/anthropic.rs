//! Placeholder until this wire API lands: every call ends in an error
//! event that says so (never a fake answer).

use super::{empty_message, EventSink, Request, StreamEvent};
use crate::format::message::AssistantMessage;

/// Streams one assistant message.
pub async fn stream(req: Request, on_event: EventSink<'_>) -> AssistantMessage {
    let mut m = empty_message(&req.model);
    m.stop_reason = "error".into();
    m.error_message = Some(format!("the {} API is not implemented yet", req.model.api));
    on_event(
        &StreamEvent::Error {
            reason: "error".into(),
        },
        &m,
    );
    m
}
