//! What a run may spend and what it has spent. A [`Budget`] holds the
//! limits that bind a whole run — money (`--max-cost`), turns per agent
//! (`--max-turns`) and wall clock (`--timeout`) — and the usage every agent
//! of the run recorded: the parent's and each subagent child's, by child.
//! It travels in [`super::hooks::Limits`], so a child shares its parent's
//! budget (one purse, one clock) without anything being copied by hand.
//!
//! A limit is reached once ([`Budget::trip`]): the budget's token is
//! cancelled (children's runs hang off it) and the run's owner is told
//! through the callback it installed ([`Budget::on_trip`]), which stops the
//! run the way a signal does: the request in flight is aborted, running
//! tools are killed with their process group, the partial message is saved
//! as aborted. The agent loop records each response here and starts
//! nothing more once a limit is reached.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::hooks::Delegation;
use crate::format::message::AssistantMessage;
use crate::format::model::Model;
use crate::format::run_end::UsageSum;
use crate::format::Usage;

/// A limit of the run, as it was set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Limit {
    /// `--max-turns N`: an agent still wanted to call tools after N turns.
    MaxTurns(u32),
    /// `--max-cost USD`: the recorded cost reached it.
    MaxCost(f64),
    /// `--timeout`: the run's wall clock ran out.
    Timeout(Duration),
}

impl Limit {
    /// The `stopReason` of the run's outcome record.
    pub fn stop_reason(&self) -> &'static str {
        match self {
            Limit::MaxTurns(_) => "max_turns",
            Limit::MaxCost(_) => "max_cost",
            Limit::Timeout(_) => "timeout",
        }
    }

    /// One line saying which limit was reached.
    pub fn message(&self) -> String {
        match self {
            Limit::MaxTurns(n) => format!(
                "stopped after {n} turns (--max-turns) while the model still had tool calls"
            ),
            Limit::MaxCost(usd) => format!("stopped: the run's cost reached --max-cost ${usd}"),
            Limit::Timeout(d) => format!(
                "stopped: the run's wall clock ran out (--timeout {})",
                crate::timefmt::duration_words(*d)
            ),
        }
    }
}

/// The limits a budget enforces (all optional).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BudgetSpec {
    /// US dollars, counted from the models' prices.
    pub max_cost: Option<f64>,
    /// Turns per agent (the parent and each child).
    pub max_turns: Option<u32>,
    /// The wall clock of the whole run: when it started and how long it
    /// may take.
    pub timeout: Option<(Instant, Duration)>,
}

/// What one subagent child spent.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildSpend {
    /// The child's session id.
    pub id: String,
    /// The profile it ran (`explore`, `general-purpose`, …).
    pub agent: String,
    pub usage: UsageSum,
}

type Callback = Box<dyn Fn(Limit) + Send + Sync>;
type Warn = Box<dyn Fn(&str) + Send + Sync>;

#[derive(Default)]
struct State {
    parent: UsageSum,
    children: Vec<ChildSpend>,
    tripped: Option<Limit>,
}

/// The run's limits and spending, shared by its agents.
pub struct Budget {
    spec: BudgetSpec,
    state: Mutex<State>,
    token: CancellationToken,
    on_trip: Mutex<Option<Callback>>,
    warn: Mutex<Option<Warn>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether a model has prices to count a cost with (some price above zero).
pub fn priced(model: &Model) -> bool {
    let c = &model.cost;
    [c.input, c.output, c.cache_read, c.cache_write]
        .iter()
        .any(|p| p.is_finite() && *p > 0.0)
}

impl Budget {
    pub fn new(spec: BudgetSpec) -> Arc<Budget> {
        Arc::new(Budget {
            spec,
            state: Mutex::default(),
            token: CancellationToken::new(),
            on_trip: Mutex::default(),
            warn: Mutex::default(),
        })
    }

    /// What stops the run when a limit is reached (called once, outside
    /// any lock of the budget).
    pub fn on_trip(&self, f: impl Fn(Limit) + Send + Sync + 'static) {
        *lock(&self.on_trip) = Some(Box::new(f));
    }

    /// Where warnings about a recorded response go (a reply cut at the
    /// output token limit).
    pub fn on_warning(&self, f: impl Fn(&str) + Send + Sync + 'static) {
        *lock(&self.warn) = Some(Box::new(f));
    }

    pub fn spec(&self) -> &BudgetSpec {
        &self.spec
    }

    /// The turn limit every agent of the run obeys.
    pub fn max_turns(&self) -> Option<u32> {
        self.spec.max_turns
    }

    /// Cancelled once a limit is reached: a child's run hangs off it.
    pub fn token(&self) -> &CancellationToken {
        &self.token
    }

    /// The limit reached, if one was.
    pub fn tripped(&self) -> Option<Limit> {
        lock(&self.state).tripped
    }

    /// Reaches `limit`: the first call records it, cancels the token and
    /// tells the owner; `false` when a limit was reached already.
    pub fn trip(&self, limit: Limit) -> bool {
        {
            let mut st = lock(&self.state);
            if st.tripped.is_some() {
                return false;
            }
            st.tripped = Some(limit);
        }
        self.token.cancel();
        if let Some(f) = lock(&self.on_trip).as_ref() {
            f(limit);
        }
        true
    }

    /// A model whose cost this budget can count: any model when there is
    /// no `--max-cost`, else one with prices (a cost that always reads
    /// zero would never stop the run).
    pub fn check_priced(&self, model: &Model) -> Result<(), String> {
        match self.spec.max_cost {
            Some(_) if !priced(model) => Err(format!(
                "--max-cost needs the model's prices, and {}/{} has none (its cost in the model catalogue or models.json is missing or zero)",
                model.provider, model.id
            )),
            _ => Ok(()),
        }
    }

    /// Records one finished response of the parent (`who` is `None`) or of
    /// a child, and warns when it was cut at the output token limit.
    pub fn record(&self, msg: &AssistantMessage, who: Option<&Delegation>) {
        self.record_usage(&msg.usage, who);
        if msg.stop_reason == "length" {
            let whose = match who {
                None => "the model's reply".to_string(),
                Some(d) => format!("subagent {} ({})'s reply", d.session_id, d.profile),
            };
            if let Some(w) = lock(&self.warn).as_ref() {
                w(&format!(
                    "{whose} was cut at the output token limit (stopReason \"length\"); the answer may be incomplete"
                ));
            }
        }
    }

    /// Records usage that is not a reply (a compaction summary), and
    /// reaches `--max-cost` when the run's total got there.
    pub fn record_usage(&self, usage: &Usage, who: Option<&Delegation>) {
        let total = {
            let mut st = lock(&self.state);
            match who {
                None => st.parent.add(usage),
                Some(d) => match st.children.iter_mut().find(|c| c.id == d.session_id) {
                    Some(c) => c.usage.add(usage),
                    None => {
                        let mut sum = UsageSum::default();
                        sum.add(usage);
                        st.children.push(ChildSpend {
                            id: d.session_id.clone(),
                            agent: d.profile.clone(),
                            usage: sum,
                        });
                    }
                },
            }
            st.parent.cost.total + st.children.iter().map(|c| c.usage.cost.total).sum::<f64>()
        };
        if let Some(max) = self.spec.max_cost {
            if total >= max {
                self.trip(Limit::MaxCost(max));
            }
        }
    }

    /// What the parent spent.
    pub fn parent(&self) -> UsageSum {
        lock(&self.state).parent.clone()
    }

    /// What each child spent, in the order they first answered.
    pub fn children(&self) -> Vec<ChildSpend> {
        lock(&self.state).children.clone()
    }

    /// What the whole run spent: the parent and every child.
    pub fn total(&self) -> UsageSum {
        let st = lock(&self.state);
        let mut t = st.parent.clone();
        for c in &st.children {
            t.merge(&c.usage);
        }
        t
    }

    /// Starts the wall clock (call inside the run's async runtime): when
    /// it runs out the timeout is reached; at once when it ran out already.
    pub fn arm_timeout(self: &Arc<Self>) {
        let Some((start, limit)) = self.spec.timeout else {
            return;
        };
        let me = Arc::downgrade(self);
        let deadline = tokio::time::Instant::from_std(start + limit);
        tokio::spawn(async move {
            tokio::time::sleep_until(deadline).await;
            if let Some(b) = me.upgrade() {
                b.trip(Limit::Timeout(limit));
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Num;

    fn model() -> Model {
        serde_json::from_value(serde_json::json!({"id": "m", "name": "m", "api": "faux",
            "provider": "p", "baseUrl": "", "cost": {"input": 3, "output": 15}}))
        .unwrap()
    }

    fn reply(input: u64, output: u64, cost: f64, stop: &str) -> AssistantMessage {
        let mut m = crate::provider::empty_message(&model());
        m.usage = Usage {
            input: Num::int(input),
            output: Num::int(output),
            total_tokens: Num::int(input + output),
            ..Usage::default()
        };
        m.usage.cost.total = Num::float(cost);
        m.stop_reason = stop.into();
        m
    }

    fn child(id: &str) -> Delegation {
        Delegation {
            session_id: id.into(),
            profile: "explore".into(),
            parent_tool_call_id: "call_1".into(),
        }
    }

    #[test]
    fn spending_is_kept_by_agent_and_the_cost_limit_trips_once_at_the_total() {
        let b = Budget::new(BudgetSpec {
            max_cost: Some(0.01),
            ..BudgetSpec::default()
        });
        let trips = Arc::new(Mutex::new(Vec::new()));
        let t = Arc::clone(&trips);
        b.on_trip(move |l| t.lock().unwrap().push(l));
        b.record(&reply(100, 10, 0.004, "toolUse"), None);
        b.record(&reply(50, 5, 0.003, "stop"), Some(&child("c1")));
        assert_eq!(b.tripped(), None);
        assert!(!b.token().is_cancelled());
        b.record(&reply(50, 5, 0.003, "stop"), Some(&child("c1")));
        assert_eq!(b.tripped(), Some(Limit::MaxCost(0.01)));
        assert!(b.token().is_cancelled());
        b.record(&reply(1, 1, 0.5, "stop"), None);
        assert_eq!(*trips.lock().unwrap(), vec![Limit::MaxCost(0.01)]);
        assert_eq!(b.parent().input, 101);
        let kids = b.children();
        assert_eq!(kids.len(), 1);
        assert_eq!((kids[0].id.as_str(), kids[0].usage.input), ("c1", 100));
        let total = b.total();
        assert_eq!(total.input, 201);
        assert_eq!(total.total_tokens, 201 + 21);
        assert!((total.cost.total - 0.51).abs() < 1e-12);
    }

    #[test]
    fn a_length_stop_warns_naming_whose_reply_it_was() {
        let b = Budget::new(BudgetSpec::default());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = Arc::clone(&seen);
        b.on_warning(move |w| s.lock().unwrap().push(w.to_string()));
        b.record(&reply(1, 1, 0.0, "stop"), None);
        b.record(&reply(1, 1, 0.0, "length"), None);
        b.record(&reply(1, 1, 0.0, "length"), Some(&child("kid")));
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 2);
        assert!(
            seen[0].starts_with("the model's reply was cut"),
            "{}",
            seen[0]
        );
        assert!(seen[1].contains("subagent kid (explore)"), "{}", seen[1]);
    }

    #[test]
    fn an_unpriced_model_is_refused_only_under_a_cost_limit() {
        let mut m = model();
        m.cost = Default::default();
        assert!(Budget::new(BudgetSpec::default()).check_priced(&m).is_ok());
        let b = Budget::new(BudgetSpec {
            max_cost: Some(1.0),
            ..BudgetSpec::default()
        });
        let e = b.check_priced(&m).unwrap_err();
        assert!(e.contains(&format!("{}/{}", m.provider, m.id)), "{e}");
        m.cost.output = 2.0;
        assert!(b.check_priced(&m).is_ok());
    }

    #[tokio::test]
    async fn the_wall_clock_trips_the_timeout_even_when_it_ran_out_already() {
        let b = Budget::new(BudgetSpec {
            timeout: Some((
                Instant::now() - Duration::from_secs(5),
                Duration::from_secs(1),
            )),
            ..BudgetSpec::default()
        });
        b.arm_timeout();
        tokio::time::timeout(Duration::from_secs(5), b.token().cancelled())
            .await
            .expect("the timeout trips");
        assert_eq!(b.tripped(), Some(Limit::Timeout(Duration::from_secs(1))));
    }
}
