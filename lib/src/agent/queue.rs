//! Messages waiting for the agent: steering, follow-up and next-turn
//! queues, plus what arrives while the agent is idle — with pi 1.6.0's
//! delivery rules. Extensions (`sendMessage`,
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

/// A queued steering or follow-up message. `text` is what a client sees in
/// `queue_update` (set for user text queued by `steer`, `follow_up` or a
/// queued `prompt`; extension messages are not listed).
#[derive(Debug, Clone)]
struct Queued {
    msg: AgentMessage,
    text: Option<String>,
}

impl From<AgentMessage> for Queued {
    fn from(msg: AgentMessage) -> Queued {
        Queued { msg, text: None }
    }
}

/// Which of the two client-visible queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueKind {
    Steering,
    FollowUp,
}

/// One message taken off a queue at a delivery point; `listed` when it was
/// in `queue_update` (so its delivery emits one).
#[derive(Debug, Clone)]
pub struct Delivered {
    pub message: AgentMessage,
    pub listed: bool,
}

#[derive(Debug, Default)]
struct State {
    streaming: bool,
    steering_mode: DrainMode,
    follow_up_mode: DrainMode,
    steering: VecDeque<Queued>,
    follow_up: VecDeque<Queued>,
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

fn drain(q: &mut VecDeque<Queued>, mode: DrainMode) -> Vec<AgentMessage> {
    let n = planned(q, mode);
    q.drain(..n).map(|e| e.msg).collect()
}

fn planned(q: &VecDeque<Queued>, mode: DrainMode) -> usize {
    match mode {
        DrainMode::All => q.len(),
        DrainMode::OneAtATime => q.len().min(1),
    }
}

fn texts(q: &VecDeque<Queued>) -> Vec<String> {
    q.iter().filter_map(|e| e.text.clone()).collect()
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
                s.follow_up.push_back(m.into());
            } else {
                s.steering.push_back(m.into());
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
                Some(DeliverAs::Steer) => s.steering.push_back(message.into()),
                Some(DeliverAs::FollowUp) => s.follow_up.push_back(message.into()),
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

    /// A steering message (not listed in `queue_update`).
    pub fn steer(&self, m: AgentMessage) {
        lock(&self.state).steering.push_back(m.into());
    }

    /// A follow-up message (not listed in `queue_update`).
    pub fn follow_up(&self, m: AgentMessage) {
        lock(&self.state).follow_up.push_back(m.into());
    }

    /// A client's user message (an RPC `steer`, `follow_up` or queued
    /// `prompt`): listed in `queue_update` as `text`.
    pub fn enqueue_listed(&self, kind: QueueKind, m: AgentMessage, text: String) {
        let mut s = lock(&self.state);
        let e = Queued {
            msg: m,
            text: Some(text),
        };
        match kind {
            QueueKind::Steering => s.steering.push_back(e),
            QueueKind::FollowUp => s.follow_up.push_back(e),
        }
    }

    /// The listed texts of both queues (`queue_update`, `clear_queue`).
    pub fn listed(&self) -> (Vec<String>, Vec<String>) {
        let s = lock(&self.state);
        (texts(&s.steering), texts(&s.follow_up))
    }

    /// Empties both queues; the listed texts that were in them.
    pub fn clear(&self) -> (Vec<String>, Vec<String>) {
        let mut s = lock(&self.state);
        let out = (texts(&s.steering), texts(&s.follow_up));
        s.steering.clear();
        s.follow_up.clear();
        out
    }

    /// `get_state.pendingMessageCount`: everything waiting in both queues.
    pub fn pending_count(&self) -> usize {
        let s = lock(&self.state);
        s.steering.len() + s.follow_up.len()
    }

    /// The drain modes (`steeringMode`, `followUpMode`).
    pub fn modes(&self) -> (DrainMode, DrainMode) {
        let s = lock(&self.state);
        (s.steering_mode, s.follow_up_mode)
    }

    pub fn set_mode(&self, kind: QueueKind, mode: DrainMode) {
        let mut s = lock(&self.state);
        match kind {
            QueueKind::Steering => s.steering_mode = mode,
            QueueKind::FollowUp => s.follow_up_mode = mode,
        }
    }

    /// How many messages a drain of `kind` delivers now (by its mode).
    /// The loop then takes them one by one with [`MessageQueue::pop`] at
    /// the delivery point, so each delivery reports the queue as it is
    /// after that message left (pi's `queue_update` right before the
    /// delivered message).
    pub fn plan(&self, kind: QueueKind) -> usize {
        let s = lock(&self.state);
        match kind {
            QueueKind::Steering => planned(&s.steering, s.steering_mode),
            QueueKind::FollowUp => planned(&s.follow_up, s.follow_up_mode),
        }
    }

    /// Takes the first message of `kind` (`None` if it was cleared since
    /// it was planned).
    pub fn pop(&self, kind: QueueKind) -> Option<Delivered> {
        let mut s = lock(&self.state);
        let q = match kind {
            QueueKind::Steering => &mut s.steering,
            QueueKind::FollowUp => &mut s.follow_up,
        };
        q.pop_front().map(|e| Delivered {
            listed: e.text.is_some(),
            message: e.msg,
        })
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

    /// Takes back the first custom message `which` accepts that was sent
    /// with [`MessageQueue::send_custom`] and is not delivered yet (queued
    /// as steering or follow-up, or waiting to start an idle run); `true`
    /// when one was removed. A sender whose message became pointless
    /// meanwhile (a subagent report read through `get_subagent_result`)
    /// withdraws it so it never reaches the model.
    pub fn withdraw_custom(&self, which: impl Fn(&CustomMessage) -> bool) -> bool {
        let mut guard = lock(&self.state);
        let s = &mut *guard;
        let hit = |q: &Queued| matches!(&q.msg, AgentMessage::Custom(c) if which(c));
        for q in [&mut s.steering, &mut s.follow_up] {
            if let Some(i) = q.iter().position(hit) {
                q.remove(i);
                return true;
            }
        }
        let idle = s
            .idle_runs
            .iter()
            .position(|r| matches!(r, IdleRun::Custom(c) if which(c)));
        if let Some(i) = idle {
            s.idle_runs.remove(i);
            return true;
        }
        false
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
    fn a_custom_message_not_delivered_yet_can_be_withdrawn() {
        let q = MessageQueue::default();
        let is = |t: &'static str| move |c: &CustomMessage| c.custom_type == t;
        // Idle with a trigger: the run it would start is taken back.
        q.send_custom(custom("idle"), Some(true), None);
        assert!(q.withdraw_custom(is("idle")));
        assert!(q.take_idle_run().is_none());
        q.set_streaming(true);
        q.send_custom(custom("f1"), Some(true), Some(DeliverAs::FollowUp));
        q.send_custom(custom("f2"), Some(true), Some(DeliverAs::FollowUp));
        q.send_custom(custom("s"), None, None);
        assert!(q.withdraw_custom(is("f1")));
        assert!(q.withdraw_custom(is("s")));
        // Gone once: nothing else matches, the rest stays in order.
        assert!(!q.withdraw_custom(is("f1")));
        assert!(!q.withdraw_custom(is("missing")));
        assert_eq!(types(q.drain_follow_up()), ["f2"]);
        assert!(!q.has_pending());
        // A delivered message cannot be withdrawn.
        q.send_custom(custom("d"), Some(true), Some(DeliverAs::FollowUp));
        assert_eq!(types(q.drain_follow_up()), ["d"]);
        assert!(!q.withdraw_custom(is("d")));
    }

    #[test]
    fn listed_messages_are_planned_then_popped() {
        let q = MessageQueue::default();
        let m = |t: &str| AgentMessage::Custom(Box::new(custom(t)));
        q.enqueue_listed(QueueKind::Steering, m("s1"), "S1".into());
        q.enqueue_listed(QueueKind::Steering, m("s2"), "S2".into());
        q.follow_up(m("hidden"));
        q.enqueue_listed(QueueKind::FollowUp, m("f1"), "F1".into());
        assert_eq!(
            q.listed(),
            (vec!["S1".into(), "S2".into()], vec!["F1".into()])
        );
        assert_eq!(q.pending_count(), 4);
        assert_eq!(q.plan(QueueKind::Steering), 1, "one at a time");
        q.set_mode(QueueKind::Steering, DrainMode::All);
        assert_eq!(q.plan(QueueKind::Steering), 2);
        let d = q.pop(QueueKind::Steering).unwrap();
        assert!(d.listed);
        assert_eq!(q.listed().0, vec!["S2".to_string()]);
        let hidden = q.pop(QueueKind::FollowUp).unwrap();
        assert!(!hidden.listed);
        assert_eq!(q.clear(), (vec!["S2".into()], vec!["F1".into()]));
        assert_eq!(q.pending_count(), 0);
        assert!(q.pop(QueueKind::FollowUp).is_none());
    }

    #[test]
    fn all_mode_drains_everything() {
        let q = MessageQueue::new(DrainMode::All, DrainMode::All);
        q.steer(AgentMessage::Custom(Box::new(custom("a"))));
        q.steer(AgentMessage::Custom(Box::new(custom("b"))));
        assert_eq!(types(q.drain_steering()), ["a", "b"]);
    }
}
