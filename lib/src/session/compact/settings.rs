//! The `compaction` settings for one model: `enabled`, `reserveTokens`
//! and `keepRecentTokens`, each from `modelOverrides["provider/id"]`, else
//! the plain setting, else the default.

use serde_json::Value;

/// `compaction.reserveTokens` default.
pub const DEFAULT_RESERVE_TOKENS: u64 = 16384;
/// `compaction.keepRecentTokens` default.
pub const DEFAULT_KEEP_RECENT_TOKENS: u64 = 20000;

/// The `compaction` settings for one model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactionSettings {
    pub enabled: bool,
    pub reserve_tokens: u64,
    pub keep_recent_tokens: u64,
}

impl Default for CompactionSettings {
    fn default() -> Self {
        CompactionSettings {
            enabled: true,
            reserve_tokens: DEFAULT_RESERVE_TOKENS,
            keep_recent_tokens: DEFAULT_KEEP_RECENT_TOKENS,
        }
    }
}

impl CompactionSettings {
    /// Reads `compaction` from merged settings for `model` (`"provider/id"`):
    /// each of `reserveTokens` and `keepRecentTokens` comes from
    /// `modelOverrides[model]`, else the ordinary setting, else the default.
    /// A value that is not a non-negative safe integer is an error naming
    /// the key.
    pub fn from_settings(
        settings: &crate::settings::Settings,
        model: Option<&str>,
    ) -> Result<CompactionSettings, String> {
        let mut out = CompactionSettings::default();
        let Some(c) = settings.values.get("compaction") else {
            return Ok(out);
        };
        let Value::Object(c) = c else {
            return Err("settings: \"compaction\" must be an object".into());
        };
        if let Some(v) = c.get("enabled") {
            out.enabled = v
                .as_bool()
                .ok_or("settings: \"compaction.enabled\" must be true or false")?;
        }
        let over = model
            .and_then(|m| c.get("modelOverrides")?.get(m))
            .and_then(Value::as_object);
        for (key, slot) in [
            ("reserveTokens", &mut out.reserve_tokens),
            ("keepRecentTokens", &mut out.keep_recent_tokens),
        ] {
            let (v, name) = match over.and_then(|o| o.get(key)) {
                Some(v) => (
                    Some(v),
                    format!(
                        "compaction.modelOverrides[\"{}\"].{key}",
                        model.unwrap_or("")
                    ),
                ),
                None => (c.get(key), format!("compaction.{key}")),
            };
            if let Some(v) = v {
                *slot = safe_int(v).ok_or_else(|| {
                    format!("settings: \"{name}\" must be a non-negative integer, got {v}")
                })?;
            }
        }
        Ok(out)
    }
}

/// A JSON number that is a non-negative integer no larger than 2^53 - 1.
pub(crate) fn safe_int(v: &Value) -> Option<u64> {
    const MAX_SAFE: f64 = 9_007_199_254_740_991.0;
    let f = v.as_f64()?;
    ((0.0..=MAX_SAFE).contains(&f) && f.fract() == 0.0).then_some(f as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn settings_validation_and_overrides() {
        let st = |v: Value| crate::settings::Settings {
            values: v.as_object().unwrap().clone(),
        };
        let s = st(
            json!({"compaction": {"keepRecentTokens": 5, "modelOverrides": {"p/m": {"reserveTokens": 7}}}}),
        );
        let c = CompactionSettings::from_settings(&s, Some("p/m")).unwrap();
        assert_eq!((c.reserve_tokens, c.keep_recent_tokens), (7, 5));
        let c = CompactionSettings::from_settings(&s, Some("p/other")).unwrap();
        assert_eq!(
            (c.reserve_tokens, c.keep_recent_tokens),
            (DEFAULT_RESERVE_TOKENS, 5)
        );
        for bad in [json!(-1), json!(1.5), json!("10")] {
            let s = st(json!({"compaction": {"reserveTokens": bad}}));
            let e = CompactionSettings::from_settings(&s, None).unwrap_err();
            assert!(e.contains("compaction.reserveTokens"), "{e}");
        }
    }
}
