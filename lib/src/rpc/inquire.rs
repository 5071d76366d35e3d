//! Commands answered while a run streams, as pi 1.6.0 answers them at
//! once (`get_session_stats`, `get_entries`, `get_tree`,
//! `get_fork_messages`, the model and thinking-level commands). The
//! command loop cannot touch the agent while its run future holds it, so
//! the commands go to the running agent instead
//! ([`crate::agent::hooks::Inquiries`]): it answers them with its current
//! state wherever it waits (the model's stream, tools, hooks), and
//! whatever is left when the run ends is answered then. One mechanism for
//! all of them, the same answer code as when idle.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::Notify;

use crate::agent::hooks::{BoxFuture, Inquiries};
use crate::agent::Agent;
use crate::format::rpc::{RpcCommand, RpcResponse};

/// The commands sent during one run.
pub(super) struct Asked {
    /// The server's state as the run began (answers go to its output).
    ctl: Mutex<super::Ctl>,
    waiting: Mutex<VecDeque<(Option<Value>, String, RpcCommand)>>,
    ring: Notify,
}

impl Asked {
    pub(super) fn new(ctl: super::Ctl) -> Arc<Asked> {
        Arc::new(Asked {
            ctl: Mutex::new(ctl),
            waiting: Mutex::default(),
            ring: Notify::new(),
        })
    }

    /// Queues a read command for the agent to answer.
    pub(super) fn ask(&self, id: Option<Value>, kind: String, cmd: RpcCommand) {
        self.waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_back((id, kind, cmd));
        self.ring.notify_one();
    }
}

impl Inquiries for Asked {
    fn ready(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.ring.notified())
    }

    fn serve(&self, agent: &mut Agent) {
        loop {
            let next = self
                .waiting
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .pop_front();
            let Some((id, kind, cmd)) = next else { break };
            let mut ctl = self.ctl.lock().unwrap_or_else(|p| p.into_inner());
            let r = ctl.idle(agent, cmd);
            ctl.out.record(&match r {
                Ok(d) => RpcResponse::ok(id, &kind, d),
                Err(e) => RpcResponse::err(id, &kind, e),
            });
        }
    }
}
