//! From session context to what a provider receives (pi's `convertToLlm`
//! plus the collapsed system prompt): user, assistant and toolResult pass
//! through; bash executions, custom messages and summaries become user text;
//! system messages are replayed into one leading prompt and the tool list.

use serde_json::Map;

use crate::format::message::{MessageRef, UserMessage};
use crate::format::tool::ToolDefinition;
use crate::format::{AgentMessage, ContentBlock, UserContent};
use crate::prompt::PromptState;

/// A request's conversation part.
#[derive(Debug, Clone)]
pub struct LlmContext<'a> {
    pub system_prompt: Option<String>,
    pub messages: Vec<MessageRef<'a>>,
    pub tools: Vec<ToolDefinition>,
}

fn user_text(text: String, ts: crate::format::Num) -> AgentMessage {
    AgentMessage::User(UserMessage {
        content: UserContent::Blocks(vec![ContentBlock::text(text)]),
        timestamp: ts,
        extra: Map::new(),
    })
}

/// The text pi sends for a user `!command` (bashExecution).
pub fn bash_execution_text(m: &crate::format::message::BashExecutionMessage) -> String {
    let mut t = format!("Ran `{}`\n", m.command);
    if m.output.is_empty() {
        t.push_str("(no output)");
    } else {
        t.push_str(&format!("```\n{}\n```", m.output));
    }
    if m.cancelled {
        t.push_str("\n\n(command cancelled)");
    } else if let Some(code) = m.exit_code.as_ref().map(|c| c.as_i64()).filter(|c| *c != 0) {
        t.push_str(&format!("\n\nCommand exited with code {code}"));
    }
    if m.truncated {
        if let Some(p) = &m.full_output_path {
            t.push_str(&format!("\n\n[Output truncated. Full output: {p}]"));
        }
    }
    t
}

/// One context message as the model receives it (pi's `convertToLlm`):
/// user, assistant and toolResult messages borrowed, bash executions,
/// custom messages and summaries as user text; `None` for system messages
/// (they become the prompt) and for what the model never sees.
pub fn llm_message(m: &AgentMessage) -> Option<MessageRef<'_>> {
    Some(match m {
        AgentMessage::User(_) | AgentMessage::Assistant(_) | AgentMessage::ToolResult(_) => MessageRef::Borrowed(m),
        AgentMessage::BashExecution(b) => {
            if b.exclude_from_context == Some(true) {
                return None;
            }
            user_text(bash_execution_text(b), b.timestamp.clone()).into()
        }
        AgentMessage::Custom(c) => AgentMessage::User(UserMessage {
            content: UserContent::Blocks(c.content.to_blocks()),
            timestamp: c.timestamp.clone(),
            extra: Map::new(),
        })
        .into(),
        AgentMessage::BranchSummary(b) => user_text(
            format!(
                "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n{}</summary>",
                b.summary
            ),
            b.timestamp.clone(),
        )
        .into(),
        AgentMessage::CompactionSummary(c) => user_text(
            format!(
                "The conversation history before this point was compacted into the following summary:\n\n<summary>\n{}\n</summary>",
                c.summary
            ),
            c.timestamp.clone(),
        )
        .into(),
        AgentMessage::System(_) | AgentMessage::Unknown(_) => return None,
    })
}

/// Converts context messages for a request: user, assistant and
/// toolResult messages are borrowed, not copied.
pub fn to_llm<'a, I>(messages: I) -> LlmContext<'a>
where
    I: IntoIterator<Item = &'a AgentMessage>,
    I::IntoIter: Clone,
{
    let messages = messages.into_iter();
    let state = PromptState::replay(messages.clone());
    let out: Vec<MessageRef<'a>> = messages.filter_map(llm_message).collect();
    let prompt = state.render();
    LlmContext {
        system_prompt: (!prompt.is_empty()).then_some(prompt),
        messages: out,
        tools: state.tool_definitions(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(v: serde_json::Value) -> AgentMessage {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn requests_borrow_conversation_messages_and_build_the_rest() {
        let history = [
            msg(serde_json::json!({"role":"user","content":"one","timestamp":1})),
            msg(
                serde_json::json!({"role":"branchSummary","summary":"tried","fromId":"a","timestamp":2}),
            ),
            msg(
                serde_json::json!({"role":"assistant","content":[{"type":"text","text":"ok"}],"api":"a","provider":"p","model":"m","usage":{},"stopReason":"stop","timestamp":3}),
            ),
        ];
        let llm = to_llm(history.iter());
        assert_eq!(llm.messages.len(), 3);
        assert!(matches!(llm.messages[0], MessageRef::Borrowed(_)));
        assert!(std::ptr::eq(&*llm.messages[0], &history[0]));
        assert!(matches!(llm.messages[1], MessageRef::Owned(_)));
        assert_eq!(llm.messages[1].role(), "user");
        assert!(std::ptr::eq(&*llm.messages[2], &history[2]));
    }
}
