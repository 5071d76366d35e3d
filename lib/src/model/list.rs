//! `pi --list-models [search]`: the models whose provider has credentials,
//! optionally filtered by a fuzzy search, sorted by provider then id, as a
//! table:
//!
//! ```text
//! provider   model                       context  max-out  thinking  images
//! anthropic  claude-haiku-4-5            200K     64K      yes       yes
//! ```
//!
//! Observed from pi 1.6.0 (and compared line for line in lib/tests/models.rs):
//! every cell, the last included, is padded to its column width and columns
//! are joined by two spaces; token counts print as `1M`, `1.0M`, `128K`,
//! `16.4K`, `999`; the search is split on whitespace and every token must
//! match `"<provider> <id>"` as a case-insensitive subsequence (a token like
//! `codex52` also matches as `52codex`); sorting uses JavaScript's
//! `localeCompare` (ICU root collation), approximated here for ASCII by
//! [`locale_cmp`].

use std::cmp::Ordering;

use super::ModelRegistry;

/// One line of the listing.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRow {
    pub provider: String,
    pub model: String,
    pub context_window: u64,
    pub max_tokens: u64,
    /// The model supports thinking (`reasoning`).
    pub thinking: bool,
    /// The model accepts images.
    pub images: bool,
}

/// The result of [`list_models`]: the rows and what they were chosen from.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelList {
    pub rows: Vec<ModelRow>,
    /// The search, if any.
    pub search: Option<String>,
    /// How many models had credentials before filtering.
    pub available: usize,
}

/// What `pi --list-models [search]` lists.
pub fn list_models(reg: &ModelRegistry, search: Option<&str>) -> ModelList {
    let available = reg.available();
    let n = available.len();
    let mut rows: Vec<ModelRow> = available
        .into_iter()
        .filter(|m| match search {
            Some(s) => fuzzy_filter_match(s, &format!("{} {}", m.provider, m.id)),
            None => true,
        })
        .map(|m| ModelRow {
            provider: m.provider.clone(),
            model: m.id.clone(),
            context_window: m.context_window,
            max_tokens: m.max_tokens,
            thinking: m.reasoning,
            images: m.input.iter().any(|i| i == "image"),
        })
        .collect();
    rows.sort_by(|a, b| {
        locale_cmp(&a.provider, &b.provider).then_with(|| locale_cmp(&a.model, &b.model))
    });
    ModelList {
        rows,
        search: search.map(str::to_string),
        available: n,
    }
}

/// The text pi prints for `list` (ends with a newline).
pub fn render_model_list(list: &ModelList) -> String {
    if list.available == 0 {
        return "No models available. Set a provider's API key (e.g. ANTHROPIC_API_KEY) or add it to <agentDir>/auth.json.\n".into();
    }
    if list.rows.is_empty() {
        return format!(
            "No models matching \"{}\"\n",
            list.search.as_deref().unwrap_or("")
        );
    }
    let yes = |b: bool| if b { "yes" } else { "no" }.to_string();
    let mut table: Vec<[String; 6]> = vec![[
        "provider".into(),
        "model".into(),
        "context".into(),
        "max-out".into(),
        "thinking".into(),
        "images".into(),
    ]];
    for r in &list.rows {
        table.push([
            r.provider.clone(),
            r.model.clone(),
            format_tokens(r.context_window),
            format_tokens(r.max_tokens),
            yes(r.thinking),
            yes(r.images),
        ]);
    }
    let mut widths = [0usize; 6];
    for row in &table {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for (i, row) in table.iter().enumerate() {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .enumerate()
            .map(|(j, (c, w))| {
                // The header's last cell is not padded (pi prints it bare).
                if i == 0 && j == 5 {
                    c.clone()
                } else {
                    format!("{c:<w$}")
                }
            })
            .collect();
        out.push_str(&cells.join("  "));
        out.push('\n');
    }
    out
}

/// pi's token count: `1M`, `1.0M`, `128K`, `16.4K`, `999`.
pub fn format_tokens(n: u64) -> String {
    let unit = |v: f64, suffix: &str| {
        if v.fract() == 0.0 {
            format!("{v}{suffix}")
        } else {
            format!("{v:.1}{suffix}")
        }
    };
    if n >= 1_000_000 {
        unit(n as f64 / 1e6, "M")
    } else if n >= 1_000 {
        unit(n as f64 / 1e3, "K")
    } else {
        n.to_string()
    }
}

/// Every whitespace-separated token of `query` fuzzy-matches `text`.
pub fn fuzzy_filter_match(query: &str, text: &str) -> bool {
    let text = text.to_lowercase();
    query
        .split_whitespace()
        .all(|t| fuzzy_token_match(&t.to_lowercase(), &text))
}

fn fuzzy_token_match(token: &str, text: &str) -> bool {
    if is_subsequence(token, text) {
        return true;
    }
    // `codex52` also tries `52codex` and vice versa.
    let split = token
        .find(|c: char| c.is_ascii_digit())
        .filter(|&i| i > 0)
        .map(|i| (&token[..i], &token[i..]))
        .filter(|(a, b)| {
            a.chars().all(|c| c.is_ascii_lowercase()) && b.chars().all(|c| c.is_ascii_digit())
        })
        .or_else(|| {
            token
                .find(|c: char| c.is_ascii_lowercase())
                .filter(|&i| i > 0)
                .map(|i| (&token[..i], &token[i..]))
                .filter(|(a, b)| {
                    a.chars().all(|c| c.is_ascii_digit())
                        && b.chars().all(|c| c.is_ascii_lowercase())
                })
        });
    match split {
        Some((a, b)) => is_subsequence(&format!("{b}{a}"), text),
        None => false,
    }
}

fn is_subsequence(needle: &str, hay: &str) -> bool {
    let mut it = hay.chars();
    needle.chars().all(|c| it.any(|h| h == c))
}

/// Primary collation weight of an ASCII character in ICU's root order:
/// whitespace, punctuation and symbols (in CLDR order), digits, letters
/// (case-insensitive).
fn primary(c: char) -> u32 {
    const PUNCT: &str = "_-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$";
    if c.is_whitespace() {
        return 1;
    }
    if let Some(i) = PUNCT.find(c) {
        return 10 + i as u32;
    }
    if c.is_ascii_digit() {
        return 100 + (c as u32 - '0' as u32);
    }
    if c.is_ascii_alphabetic() {
        return 200 + (c.to_ascii_lowercase() as u32 - 'a' as u32);
    }
    1000 + c as u32
}

/// JavaScript `a.localeCompare(b)` (ICU root collation), approximated:
/// primary weights first, then lowercase before uppercase, then code points.
pub fn locale_cmp(a: &str, b: &str) -> Ordering {
    let pa = a.chars().map(primary);
    let pb = b.chars().map(primary);
    pa.cmp(pb)
        .then_with(|| {
            let ta = a.chars().map(|c| c.is_uppercase());
            let tb = b.chars().map(|c| c.is_uppercase());
            ta.cmp(tb)
        })
        .then_with(|| a.cmp(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_tokens_like_pi() {
        assert_eq!(format_tokens(1_000_000), "1M");
        assert_eq!(format_tokens(1_047_576), "1.0M");
        assert_eq!(format_tokens(1_500_000), "1.5M");
        assert_eq!(format_tokens(128_000), "128K");
        assert_eq!(format_tokens(16_384), "16.4K");
        assert_eq!(format_tokens(8192), "8.2K");
        assert_eq!(format_tokens(999), "999");
        assert_eq!(format_tokens(1234), "1.2K");
    }

    #[test]
    fn fuzzy_tokens() {
        assert!(fuzzy_filter_match("opus 4", "anthropic claude-opus-4-6"));
        // "opus" as a subsequence across provider and id, as pi matches it.
        assert!(fuzzy_filter_match("opus 4", "anthropic claude-sonnet-4-5"));
        assert!(!fuzzy_filter_match("opus 4", "anthropic claude-sonnet-5"));
        assert!(fuzzy_filter_match("SONN", "anthropic claude-sonnet-5"));
        assert!(fuzzy_filter_match("gpt4o", "openai gpt-4o"));
        assert!(fuzzy_filter_match("4ogpt", "openai gpt-4o-mini-gpt"));
        assert!(!fuzzy_filter_match("zzzz", "openai gpt-4o"));
    }

    #[test]
    fn collation_orders_punctuation_before_digits_and_letters() {
        assert_eq!(locale_cmp("gpt-4-turbo", "gpt-4.1"), Ordering::Less);
        assert_eq!(locale_cmp("gpt-4.1", "gpt-4o"), Ordering::Less);
        assert_eq!(locale_cmp("~anthropic/x", "anthropic/x"), Ordering::Less);
        assert_eq!(locale_cmp("a_b", "a-b"), Ordering::Less);
        assert_eq!(locale_cmp("Abc", "abd"), Ordering::Less);
        assert_eq!(locale_cmp("abc", "Abc"), Ordering::Less);
    }
}
