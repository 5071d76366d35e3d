//! What happens to a prompt before it runs, in pi's order: an extension
//! command (`/name args`) runs instead of the agent; the extensions'
//! `input` handlers may rewrite the text or handle it; then `/skill:name`
//! and `/template args` are expanded. Chat only loads no skills or
//! templates, so nothing is expanded there.

use serde_json::Value;

use crate::agent::hooks::{InputEvent, InputOutcome};
use crate::agent::{Agent, Emit};
use crate::format::{AgentMessage, ContentBlock, UserContent};
use crate::prompt::expand::{expand_input, NoHooks};
use crate::resources::Resources;

/// The prompt as it runs; `None`: a command or an `input` handler took
/// it and nothing is sent to the model.
pub async fn preflight(
    agent: &mut Agent,
    user: AgentMessage,
    resources: &Resources,
    chat_only: bool,
    prog: &str,
    emit: Emit<'_>,
) -> Option<AgentMessage> {
    let AgentMessage::User(mut u) = user else {
        return Some(user);
    };
    if agent.ext.hooks.is_some() {
        let text = u.content.joined_text("\n");
        if let Some(rest) = text.strip_prefix('/') {
            let (name, args) = rest.split_once(' ').unwrap_or((rest, ""));
            if agent.command(name, args.trim_start(), emit).await {
                return None;
            }
        }
        let images: Vec<Value> = match &u.content {
            UserContent::Blocks(b) => b
                .iter()
                .filter(|b| matches!(b, ContentBlock::Image(_)))
                .filter_map(|b| serde_json::to_value(b).ok())
                .collect(),
            _ => Vec::new(),
        };
        let ev = InputEvent {
            text,
            images,
            source: "interactive".into(),
            streaming_behavior: None,
        };
        match agent.input(ev, emit).await {
            InputOutcome::Handled => return None,
            InputOutcome::Transform { text, images } => {
                let mut blocks = vec![ContentBlock::text(text)];
                blocks.extend(
                    images
                        .into_iter()
                        .filter_map(|i| serde_json::from_value::<ContentBlock>(i).ok()),
                );
                u.content = UserContent::Blocks(blocks);
            }
            InputOutcome::Continue => {}
        }
    }
    expand_prompts(vec![AgentMessage::User(u)], resources, chat_only, prog)
        .into_iter()
        .next()
}

/// `/skill:name` and `/template` expansion of each prompt (not in Chat
/// only, which loads no skills or templates).
pub fn expand_prompts(
    prompts: Vec<AgentMessage>,
    resources: &Resources,
    chat_only: bool,
    prog: &str,
) -> Vec<AgentMessage> {
    if chat_only {
        return prompts;
    }
    prompts
        .into_iter()
        .map(|m| match m {
            AgentMessage::User(mut u) => {
                let text = u.content.joined_text("\n");
                let e = expand_input(&text, &resources.skills, &resources.prompts, &mut NoHooks);
                if let Some(w) = &e.warning {
                    crate::cli::warn(prog, w);
                }
                if let Some(t) = e.text {
                    if t != text {
                        u.content = UserContent::Blocks(vec![ContentBlock::text(t)]);
                    }
                }
                AgentMessage::User(u)
            }
            other => other,
        })
        .collect()
}
