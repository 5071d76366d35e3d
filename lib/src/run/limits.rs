//! The run's limits, from the command line and settings.json: `--max-cost`
//! (`limits.maxCost`, US dollars), `--timeout` (`limits.timeout`, seconds
//! or a duration string) and `--max-turns` (`limits.maxTurns`); a flag
//! wins over its key. A malformed key is a configuration error (exit 2)
//! naming it, never a silently missing limit, and `--max-cost` with a
//! model that has no prices is refused before any request: a cost that
//! always reads zero would never stop the run.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::RunOptions;
use crate::agent::budget::{Budget, BudgetSpec};
use crate::cli::CliError;
use crate::format::model::Model;
use crate::settings::Settings;

/// The settings object holding the limits.
pub const SETTINGS_KEY: &str = "limits";

/// The limits as settings.json gives them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SettingsLimits {
    pub max_cost: Option<f64>,
    pub timeout: Option<Duration>,
    pub max_turns: Option<u32>,
}

fn bad(key: &str, what: &str) -> String {
    format!("settings.json: {SETTINGS_KEY}.{key}: {what}")
}

/// Reads `limits` from the merged settings.
pub fn from_settings(settings: &Settings) -> Result<SettingsLimits, String> {
    let Some(v) = settings.values.get(SETTINGS_KEY) else {
        return Ok(SettingsLimits::default());
    };
    let Some(m) = v.as_object() else {
        return Err(format!(
            "settings.json: {SETTINGS_KEY}: expected an object like {{\"maxCost\": 2.5, \"timeout\": \"30m\", \"maxTurns\": 40}}"
        ));
    };
    let max_cost = match m.get("maxCost") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_f64()
                .filter(|c| c.is_finite() && *c > 0.0)
                .ok_or_else(|| bad("maxCost", "expected a number of US dollars above 0"))?,
        ),
    };
    let timeout = match m.get("timeout") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => {
            Some(crate::timefmt::parse_duration(s).map_err(|e| bad("timeout", &e))?)
        }
        Some(Value::Number(n)) => Some(
            n.as_f64()
                .filter(|s| s.is_finite() && *s > 0.0 && *s <= 366.0 * 86400.0)
                .map(Duration::from_secs_f64)
                .ok_or_else(|| bad("timeout", "expected seconds above 0 (at most a year)"))?,
        ),
        Some(_) => {
            return Err(bad(
                "timeout",
                "expected seconds or a duration like \"90s\", \"10m\", \"1h\"",
            ))
        }
    };
    let max_turns = match m.get("maxTurns") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .filter(|n| *n >= 1)
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| bad("maxTurns", "expected a whole number of at least 1"))?,
        ),
    };
    Ok(SettingsLimits {
        max_cost,
        timeout,
        max_turns,
    })
}

/// The run's budget: each limit from its flag, else its settings key; its
/// wall clock counts from when the run started. `model` (the run's) must
/// have prices when there is a cost limit.
pub fn budget(
    opts: &RunOptions,
    settings: &Settings,
    model: &Model,
) -> Result<Arc<Budget>, CliError> {
    let set = from_settings(settings).map_err(CliError::input)?;
    let spec = BudgetSpec {
        max_cost: opts.max_cost.or(set.max_cost),
        max_turns: opts.max_turns.or(set.max_turns),
        timeout: opts.timeout.or(set.timeout).map(|t| (opts.started, t)),
    };
    let b = Budget::new(spec);
    b.check_priced(model).map_err(|e| {
        CliError::input(e).with_hint(
            "give the model a \"cost\" in models.json ($ per million tokens), or drop --max-cost",
        )
    })?;
    Ok(b)
}

/// Parses `--max-cost`: US dollars above zero.
pub fn parse_cost(text: &str) -> Result<f64, String> {
    let t = text.trim().strip_prefix('$').unwrap_or(text.trim());
    match t.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!(
            "invalid cost \"{text}\" (US dollars above 0, like 0.50)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn with(v: Value) -> Result<SettingsLimits, String> {
        let mut values = serde_json::Map::new();
        values.insert(SETTINGS_KEY.into(), v);
        from_settings(&Settings { values })
    }

    #[test]
    fn settings_keys_are_read_and_bad_values_named() {
        assert_eq!(
            with(json!({"maxCost": 2.5, "timeout": "10m", "maxTurns": 40})),
            Ok(SettingsLimits {
                max_cost: Some(2.5),
                timeout: Some(Duration::from_secs(600)),
                max_turns: Some(40),
            })
        );
        assert_eq!(
            with(json!({"timeout": 90})).unwrap().timeout,
            Some(Duration::from_secs(90))
        );
        assert_eq!(with(json!({})), Ok(SettingsLimits::default()));
        for (v, key) in [
            (json!({"maxCost": 0}), "limits.maxCost"),
            (json!({"maxCost": "5"}), "limits.maxCost"),
            (json!({"timeout": "soon"}), "limits.timeout"),
            (json!({"timeout": -1}), "limits.timeout"),
            (json!({"maxTurns": 0}), "limits.maxTurns"),
            (json!({"maxTurns": 2.5}), "limits.maxTurns"),
            (json!(7), "limits"),
        ] {
            let e = with(v.clone()).unwrap_err();
            assert!(e.contains(key), "{v}: {e}");
        }
    }

    #[test]
    fn costs_parse_as_dollars() {
        assert_eq!(parse_cost("0.50"), Ok(0.5));
        assert_eq!(parse_cost("$2"), Ok(2.0));
        for bad in ["0", "-1", "free", "", "inf", "NaN"] {
            assert!(parse_cost(bad).is_err(), "{bad}");
        }
    }
}
