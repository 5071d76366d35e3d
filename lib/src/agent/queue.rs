//! Messages waiting for the agent: steering, follow-up and next-turn
//! queues, plus what arrives while the agent is idle — with pi 1.6.0's
//! delivery rules (reference §1.2 and §2.5). Extensions (`sendMessage`,
//! `sendUserMessage`) and, later, an RPC client put messages here from any
//! task; the loop takes them at its delivery points:
//!
//! 1. run start: the prompt's own messages, then next-turn messages, then
//!    one steering drain;
//! 2. after each turn (after `turn_end`): one steering drain; delivered
//!    messages sit inside the next turn, after its `turn_start`;
//! 3. when the run would stop: one follow-up drain, which becomes a new
//!    turn;
//! 4. after the run: what was asked to start while idle starts a new run.
//!
//! `one-at-a-time` (the default of `steeringMode` and `followUpMode`)
//! delivers one message per drain, `all` the whole queue.

use std::collections::VecDeque;
use std::sync::Mutex;

use crate::format::message::CustomMessage;
use crate::format::AgentMessage;

/// How many messages one drain delivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DrainMode {
    #[default]
    OneAtATime,
    All,
}

impl DrainMode {
    /// From the setting's value (`all`; anything else is one-at-a-time).
    pub fn from_setting(v: Option<&str>) -> DrainMode {
        match v {
            Some("all") => DrainMode::All,
            _ => DrainMode::OneAtATime,
        }
    }
}

/// pi's `deliverAs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliverAs {
    Steer,
    FollowUp,
    NextTurn,
}

impl DeliverAs {
    /// From pi's option value; `Err` names an unknown one.
    pub fn parse(v: Option<&str>) -> Result<Option<DeliverAs>, String> {
        match v {
            None => Ok(None),
            Some("steer") => Ok(Some(DeliverAs::Steer)),
            Some("followUp") => Ok(Some(DeliverAs::FollowUp)),
            Some("nextTurn") => Ok(Some(DeliverAs::NextTurn)),
            Some(other) => Err(format!("Unknown deliverAs: {other}")),
        }
    }
}

/// A run asked for while the agent was idle.
#[derive(Debug, Clone, PartialEq)]
pub enum IdleRun {
    /// `sendUserMessage` while idle: a prompt from an extension (it goes
    /// through `input` and expansion like any prompt).
    User { text: String },
    /// `sendMessage(..., {triggerTurn: true})` while idle.
    Custom(CustomMessage),
}

#[derive(Debug, Default)]
struct State {
    streaming: bool,
    steering_mode: DrainMode,
    follow_up_mode: DrainMode,
    steering: VecDeque<AgentMessage>,
    follow_up: VecDeque<AgentMessage>,
    next_turn: Vec<AgentMessage>,
    /// Custom messages sent with `triggerTurn: false` while streaming:
    /// appended at the end of the turn.
    end_of_turn: Vec<AgentMessage>,
    /// Custom messages sent while idle without a trigger: appended at once
    /// (by whoever serves the agent next).
    idle_appends: Vec<AgentMessage>,
    idle_runs: VecDeque<IdleRun>,
}

/// The queues, shared between the loop and whoever sends.
#[derive(Debug, Default)]
pub struct MessageQueue {
    state: Mutex<State>,
}

fn lock(m: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn drain(q: &mut VecDeque<AgentMessage>, mode: DrainMode) -> Vec<AgentMessage> {
    match mode {
        DrainMode::All => q.drain(..).collect(),
        DrainMode::OneAtATime => q.pop_front().into_iter().collect(),
    }
}

impl MessageQueue {
    pub fn new(steering: DrainMode, follow_up: DrainMode) -> MessageQueue {
        MessageQueue {
            state: Mutex::new(State {
                steering_mode: steering,
                follow_up_mode: follow_up,
                ..Default::default()
            }),
        }
    }

    /// Whether a run is streaming (set by the loop).
    pub fn set_streaming(&self, streaming: bool) {
        lock(&self.state).streaming = streaming;
    }

    pub fn is_streaming(&self) -> bool {
        lock(&self.state).streaming
    }

    /// `sendMessage` with pi's delivery rules.
    pub fn send_custom(
        &self,
        msg: CustomMessage,
        trigger_turn: Option<bool>,
        deliver_as: Option<DeliverAs>,
    ) {
        let mut s = lock(&self.state);
        let m = AgentMessage::Custom(Box::new(msg.clone()));
        if deliver_as == Some(DeliverAs::NextTurn) {
            s.next_turn.push(m);
        } else if s.streaming {
            if trigger_turn == Some(false) {
                s.end_of_turn.push(m);
            } else if deliver_as == Some(DeliverAs::FollowUp) {
                s.follow_up.push_back(m);
            } else {
                s.steering.push_back(m);
            }
        } else if trigger_turn == Some(true) {
            s.idle_runs.push_back(IdleRun::Custom(msg));
        } else {
            s.idle_appends.push(m);
        }
    }

    /// `sendUserMessage`: while streaming it needs `deliverAs` (pi's error
    /// otherwise); while idle it starts a run.
    pub fn send_user(
        &self,
        message: AgentMessage,
        text: String,
        deliver_as: Option<DeliverAs>,
    ) -> Result<(), String> {
        let mut s = lock(&self.state);
        if s.streaming {
            match deliver_as {
                Some(DeliverAs::Steer) => s.steering.push_back(message),
                Some(DeliverAs::FollowUp) => s.follow_up.push_back(message),
                Some(DeliverAs::NextTurn) => s.next_turn.push(message),
                None => return Err(
                    "Agent is already processing. Specify deliverAs ('steer' or 'followUp') to queue the message."
                        .into(),
                ),
            }
        } else if deliver_as == Some(DeliverAs::NextTurn) {
            s.next_turn.push(message);
        } else {
            s.idle_runs.push_back(IdleRun::User { text });
        }
        Ok(())
    }

    /// A steering message (an RPC `steer`).
    pub fn steer(&self, m: AgentMessage) {
        lock(&self.state).steering.push_back(m);
    }

    /// A follow-up message (an RPC `follow_up`).
    pub fn follow_up(&self, m: AgentMessage) {
        lock(&self.state).follow_up.push_back(m);
    }

    pub fn drain_steering(&self) -> Vec<AgentMessage> {
        let mut s = lock(&self.state);
        let mode = s.steering_mode;
        drain(&mut s.steering, mode)
    }

    pub fn drain_follow_up(&self) -> Vec<AgentMessage> {
        let mut s = lock(&self.state);
        let mode = s.follow_up_mode;
        drain(&mut s.follow_up, mode)
    }

    pub fn take_next_turn(&self) -> Vec<AgentMessage> {
        std::mem::take(&mut lock(&self.state).next_turn)
    }

    pub fn take_end_of_turn(&self) -> Vec<AgentMessage> {
        std::mem::take(&mut lock(&self.state).end_of_turn)
    }

    pub fn take_idle_appends(&self) -> Vec<AgentMessage> {
        std::mem::take(&mut lock(&self.state).idle_appends)
    }

    pub fn take_idle_run(&self) -> Option<IdleRun> {
        lock(&self.state).idle_runs.pop_front()
    }

    /// pi's `hasPendingMessages`: steering or follow-up waiting.
    pub fn has_pending(&self) -> bool {
        let s = lock(&self.state);
        !s.steering.is_empty() || !s.follow_up.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{Num, UserContent};
    use serde_json::Map;

    fn custom(t: &str) -> CustomMessage {
        CustomMessage {
            custom_type: t.into(),
            content: UserContent::Text(t.into()),
            display: false,
            details: None,
            timestamp: Num::int(0),
            extra: Map::new(),
        }
    }

    fn types(v: Vec<AgentMessage>) -> Vec<String> {
        v.into_iter()
            .map(|m| match m {
                AgentMessage::Custom(c) => c.custom_type,
                other => other.role().to_string(),
            })
            .collect()
    }

    #[test]
    fn delivery_rules_as_pi() {
        let q = MessageQueue::default();
        // Idle: no trigger appends at once, a trigger starts a run.
        q.send_custom(custom("a"), None, None);
        q.send_custom(custom("b"), Some(true), None);
        q.send_custom(custom("n"), Some(true), Some(DeliverAs::NextTurn));
        assert_eq!(types(q.take_idle_appends()), ["a"]);
        assert!(matches!(q.take_idle_run(), Some(IdleRun::Custom(c)) if c.custom_type == "b"));
        assert_eq!(types(q.take_next_turn()), ["n"]);
        // Streaming: steered by default, follow-up on request, appended at
        // the end of the turn without a trigger.
        q.set_streaming(true);
        q.send_custom(custom("s1"), None, None);
        q.send_custom(custom("s2"), Some(true), Some(DeliverAs::Steer));
        q.send_custom(custom("f"), None, Some(DeliverAs::FollowUp));
        q.send_custom(custom("e"), Some(false), None);
        assert!(q.has_pending());
        assert_eq!(types(q.drain_steering()), ["s1"], "one at a time");
        assert_eq!(types(q.drain_steering()), ["s2"]);
        assert_eq!(types(q.drain_follow_up()), ["f"]);
        assert_eq!(types(q.take_end_of_turn()), ["e"]);
        assert!(!q.has_pending());
        // sendUserMessage while streaming needs deliverAs.
        let user = AgentMessage::Custom(Box::new(custom("u")));
        assert!(q.send_user(user.clone(), "u".into(), None).is_err());
        q.send_user(user, "u".into(), Some(DeliverAs::FollowUp))
            .unwrap();
        assert_eq!(q.drain_follow_up().len(), 1);
    }

    #[test]
    fn all_mode_drains_everything() {
        let q = MessageQueue::new(DrainMode::All, DrainMode::All);
        q.steer(AgentMessage::Custom(Box::new(custom("a"))));
        q.steer(AgentMessage::Custom(Box::new(custom("b"))));
        assert_eq!(types(q.drain_steering()), ["a", "b"]);
    }
}
