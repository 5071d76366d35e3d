//! A report over many runs (`pi-session stats --all`): every outcome entry
//! `pi-run` stored in the session files of any number of folders, added
//! up — runs, turns, tokens and cost (subagent children included, as each
//! outcome counts them) — with the outcomes counted, in one total or
//! grouped by day (UTC, of the outcome's timestamp), by the session's cwd
//! or by outcome. Sessions without an outcome (pi's own, subagent
//! children, runs that never ended) count as sessions only.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use super::list::{list_sessions, SessionSummary, SortKey};
use super::resolve::listing;

/// How runs are grouped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupBy {
    Day,
    Cwd,
    Outcome,
}

/// The totals of one group (`{"type":"run_stats",…}`).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct RunTotals {
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The group's key (`null` for the total of everything).
    pub group: Option<String>,
    pub runs: u64,
    pub turns: u64,
    pub input: u64,
    pub output: u64,
    #[serde(rename = "cacheRead")]
    pub cache_read: u64,
    #[serde(rename = "cacheWrite")]
    pub cache_write: u64,
    #[serde(rename = "totalTokens")]
    pub total_tokens: u64,
    /// US dollars.
    pub cost: f64,
    #[serde(rename = "durationMs")]
    pub duration_ms: u64,
    /// How many runs ended with each `stopReason`.
    pub outcomes: BTreeMap<String, u64>,
}

/// The report: each group (in key order), then the total; and how many
/// session files were read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunReport {
    pub groups: Vec<RunTotals>,
    pub total: RunTotals,
    pub sessions: usize,
}

impl RunTotals {
    fn new(group: Option<String>) -> RunTotals {
        RunTotals {
            kind: "run_stats",
            group,
            ..RunTotals::default()
        }
    }

    fn add(&mut self, end: &crate::format::run_end::RunEnd) {
        let u = &end.usage;
        self.runs += 1;
        self.turns += end.turns;
        self.input += u.input;
        self.output += u.output;
        self.cache_read += u.cache_read;
        self.cache_write += u.cache_write;
        self.total_tokens += u.total_tokens;
        self.cost += u.cost.total;
        self.duration_ms += end.duration_ms;
        *self.outcomes.entry(end.stop_reason.clone()).or_default() += 1;
    }
}

/// The session files of every folder of `dirs` (pi's sessions folder when
/// there is none), each folder's per-cwd subfolders too.
pub fn session_files(dirs: &[PathBuf], warn: &mut dyn FnMut(&str)) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    let roots: Vec<Option<&std::path::Path>> = if dirs.is_empty() {
        vec![None]
    } else {
        dirs.iter().map(|d| Some(d.as_path())).collect()
    };
    for root in roots {
        let found = listing(root, true, None)?;
        for skip in &found.skipped {
            warn(&skip.to_string());
        }
        files.extend(found.files);
    }
    files.sort();
    files.dedup();
    Ok(files)
}

/// Adds up the stored outcomes of `sessions`, grouped by `by`.
pub fn report(sessions: &[SessionSummary], by: Option<GroupBy>) -> RunReport {
    let mut groups: BTreeMap<String, RunTotals> = BTreeMap::new();
    let mut total = RunTotals::new(None);
    for s in sessions {
        for (ts, end) in &s.outcomes {
            total.add(end);
            let key = match by {
                None => continue,
                Some(GroupBy::Day) => ts.get(..10).unwrap_or("unknown").to_string(),
                Some(GroupBy::Cwd) => s.cwd.clone(),
                Some(GroupBy::Outcome) => end.stop_reason.clone(),
            };
            groups
                .entry(key.clone())
                .or_insert_with(|| RunTotals::new(Some(key)))
                .add(end);
        }
    }
    RunReport {
        groups: groups.into_values().collect(),
        total,
        sessions: sessions.len(),
    }
}

/// The report over the session files of `dirs`.
pub fn report_dirs(
    dirs: &[PathBuf],
    by: Option<GroupBy>,
    warn: &mut dyn FnMut(&str),
) -> Result<RunReport, String> {
    let files = session_files(dirs, warn)?;
    let sessions = list_sessions(&files, SortKey::Modified, None, warn);
    Ok(report(&sessions, by))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::run_end::RunEnd;
    use serde_json::json;

    fn end(reason: &str, cost: f64, turns: u64) -> RunEnd {
        serde_json::from_value(json!({"exitCode": 0, "stopReason": reason, "turns": turns,
            "durationMs": 1000, "sessionId": "s", "sessionFile": null, "children": [],
            "usage": {"input": 10, "output": 2, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 12,
                      "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": cost}}}))
        .unwrap()
    }

    fn session(cwd: &str, outcomes: Vec<(&str, RunEnd)>) -> SessionSummary {
        SessionSummary {
            cwd: cwd.into(),
            outcomes: outcomes
                .into_iter()
                .map(|(t, e)| (t.to_string(), e))
                .collect(),
            ..SessionSummary::default()
        }
    }

    #[test]
    fn runs_add_up_and_group_by_day_cwd_and_outcome() {
        let sessions = vec![
            session(
                "/a",
                vec![
                    ("2026-01-01T10:00:00.000Z", end("completed", 0.5, 2)),
                    ("2026-01-02T10:00:00.000Z", end("max_cost", 1.0, 3)),
                ],
            ),
            session(
                "/b",
                vec![("2026-01-02T11:00:00.000Z", end("completed", 0.25, 1))],
            ),
            session("/c", vec![]),
        ];
        let r = report(&sessions, None);
        assert!(r.groups.is_empty());
        assert_eq!(
            (r.total.runs, r.total.turns, r.total.total_tokens),
            (3, 6, 36)
        );
        assert!((r.total.cost - 1.75).abs() < 1e-12);
        assert_eq!(r.total.outcomes["completed"], 2);
        assert_eq!(r.total.outcomes["max_cost"], 1);
        assert_eq!(r.sessions, 3);
        let keys = |by| -> Vec<(Option<String>, u64)> {
            report(&sessions, Some(by))
                .groups
                .into_iter()
                .map(|g| (g.group, g.runs))
                .collect()
        };
        let s = |k: &str, n| (Some(k.to_string()), n);
        assert_eq!(keys(GroupBy::Day), [s("2026-01-01", 1), s("2026-01-02", 2)]);
        assert_eq!(keys(GroupBy::Cwd), [s("/a", 2), s("/b", 1)]);
        assert_eq!(
            keys(GroupBy::Outcome),
            [s("completed", 2), s("max_cost", 1)]
        );
    }
}
