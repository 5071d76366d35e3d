//! User-input expansion, as pi 1.6.0 does it before a prompt reaches the
//! agent: extension command → extension `input` hook → `/skill:name args` →
//! `/template args` → plain user message.
//!
//! Extensions do not exist yet, so the first two steps are a seam
//! ([`InputHooks`]); [`NoHooks`] lets everything through. The rest is pure
//! apart from re-reading `SKILL.md`, which pi also does on every use.
//!
//! Every rule here was observed on the real pi 1.6.0 (black box, see
//! `tests/oracle/expand/` and `tests/fixtures/expand/cases.json`):
//!
//! * Only input that *starts* with `/` is a command; `" /t"` is plain text.
//! * `/skill:NAME ARGS`: the name runs up to the first U+0020 space (a tab or
//!   newline does not end it, so `/skill:foo\nx` is an unknown skill); ARGS
//!   are trimmed and appended raw after a blank line. The message is
//!   `<skill name="N" location="PATH">\nReferences are relative to DIR.\n\nBODY\n</skill>`,
//!   nothing escaped, BODY = the file without frontmatter, trimmed.
//! * `/NAME ARGS`: the name runs up to the first whitespace (JavaScript `\s`,
//!   so also tab, newline, NBSP, U+3000); names are case-sensitive.
//! * Arguments split on whitespace. A `"` or `'` quotes only at the start of
//!   an argument and only if a matching closing quote follows (one not
//!   preceded by a backslash); inside, `\q` (q = that quote) is `q` and other
//!   backslashes stay. After the closing quote the argument continues up to
//!   whitespace, quotes there being plain text. An unclosed quote is plain
//!   text. Empty quoted arguments (`""`) are kept.
//! * Placeholders, replaced in one left-to-right pass over the template
//!   (inserted text is never rescanned): `$N`, `$@`, `$ARGUMENTS`,
//!   `${N:-default}`, `${@:-default}`, `${ARGUMENTS:-default}`, `${@:N}`,
//!   `${@:N:L}`. A default (`[^}]*`, may span lines, not itself expanded)
//!   applies when the value is empty (for `@`: when the joined arguments are
//!   empty). `$0`/`${0:-d}` are empty. `${@:0…}` counts from 1. Other forms
//!   (`${1}`, `${@}`, `${1-x}`, `${1:=x}`, `${@:N:}`, `${ARGUMENTS:N}`, …)
//!   stay verbatim.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use regex::{Captures, Regex};
use serde::Serialize;

use crate::format::resources::{PromptTemplate, Skill};
pub use crate::resources::text::{is_js_space, js_trim, split_frontmatter};

/// What an extension command or `input` hook decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookOutcome {
    /// Not mine: carry on with the input unchanged.
    Continue,
    /// Carry on with this text instead (later steps see the new text).
    Rewritten(String),
    /// Done: nothing is sent to the model.
    Handled,
}

/// The extension seam of input processing. Both methods default to
/// [`HookOutcome::Continue`].
pub trait InputHooks {
    /// An extension command: called only for input starting with `/`, with
    /// the whole input (the implementor parses `/name args`).
    fn command(&mut self, input: &str) -> HookOutcome {
        let _ = input;
        HookOutcome::Continue
    }

    /// The extension `input` event: sees every input not handled as a command.
    fn input(&mut self, input: &str) -> HookOutcome {
        let _ = input;
        HookOutcome::Continue
    }
}

/// No extensions: every input goes through unchanged.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoHooks;

impl InputHooks for NoHooks {}

/// Which step produced the final text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ExpansionKind {
    /// An extension command handled the input; nothing to send.
    Command,
    /// The `input` hook handled the input; nothing to send.
    Handled,
    /// `/skill:name` expanded.
    Skill { name: String },
    /// `/name` prompt template expanded.
    Template { name: String },
    /// Sent as typed (after any hook rewrite).
    Plain,
}

/// The result of [`expand_input`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Expansion {
    #[serde(flatten)]
    pub kind: ExpansionKind,
    /// The user message to send; `None` when a hook handled the input.
    pub text: Option<String>,
    /// A hook rewrote the input before expansion.
    pub rewritten: bool,
    /// A problem that made a step fall through (e.g. an unreadable SKILL.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

/// Why a skill could not be expanded.
#[derive(Debug, thiserror::Error)]
pub enum ExpandError {
    #[error("cannot read skill file {}: {source}", path.display())]
    SkillRead {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Processes one user input the way pi 1.6.0 does (see the module docs).
pub fn expand_input(
    input: &str,
    skills: &[Skill],
    templates: &[PromptTemplate],
    hooks: &mut dyn InputHooks,
) -> Expansion {
    let mut text = input.to_string();
    let mut rewritten = false;
    if text.starts_with('/') {
        match hooks.command(&text) {
            HookOutcome::Continue => {}
            HookOutcome::Rewritten(t) => {
                text = t;
                rewritten = true;
            }
            HookOutcome::Handled => return handled(ExpansionKind::Command, rewritten),
        }
    }
    match hooks.input(&text) {
        HookOutcome::Continue => {}
        HookOutcome::Rewritten(t) => {
            text = t;
            rewritten = true;
        }
        HookOutcome::Handled => return handled(ExpansionKind::Handled, rewritten),
    }
    let mut warning = None;
    if let Some((skill, args)) = find_skill_command(&text, skills) {
        match expand_skill(skill, args) {
            Ok(t) => {
                return Expansion {
                    kind: ExpansionKind::Skill {
                        name: skill.name.clone(),
                    },
                    text: Some(t),
                    rewritten,
                    warning: None,
                }
            }
            Err(e) => warning = Some(e.to_string()),
        }
    }
    if let Some((tpl, args)) = find_template_command(&text, templates) {
        return Expansion {
            kind: ExpansionKind::Template {
                name: tpl.name.clone(),
            },
            text: Some(substitute_args(&tpl.content, &split_args(args))),
            rewritten,
            warning,
        };
    }
    Expansion {
        kind: ExpansionKind::Plain,
        text: Some(text),
        rewritten,
        warning,
    }
}

fn handled(kind: ExpansionKind, rewritten: bool) -> Expansion {
    Expansion {
        kind,
        text: None,
        rewritten,
        warning: None,
    }
}

/// `/skill:NAME ARGS` → the loaded skill named NAME and the raw ARGS. The
/// name ends at the first U+0020 space only.
pub fn find_skill_command<'a, 'b>(
    text: &'b str,
    skills: &'a [Skill],
) -> Option<(&'a Skill, &'b str)> {
    let rest = text.strip_prefix("/skill:")?;
    let (name, args) = rest.split_once(' ').unwrap_or((rest, ""));
    skills.iter().find(|s| s.name == name).map(|s| (s, args))
}

/// `/NAME ARGS` → the template named NAME and the raw ARGS. The name ends at
/// the first (JavaScript) whitespace character.
pub fn find_template_command<'a, 'b>(
    text: &'b str,
    templates: &'a [PromptTemplate],
) -> Option<(&'a PromptTemplate, &'b str)> {
    let rest = text.strip_prefix('/')?;
    let (name, args) = match rest.char_indices().find(|&(_, c)| is_js_space(c)) {
        Some((i, c)) => (&rest[..i], &rest[i + c.len_utf8()..]),
        None => (rest, ""),
    };
    templates.iter().find(|t| t.name == name).map(|t| (t, args))
}

/// The user message for `/skill:name args`: SKILL.md re-read, frontmatter
/// stripped, body trimmed, wrapped in `<skill …>`; trimmed args, when any,
/// after a blank line.
pub fn expand_skill(skill: &Skill, args: &str) -> Result<String, ExpandError> {
    let raw =
        crate::resources::text::read(&skill.path).map_err(|source| ExpandError::SkillRead {
            path: skill.path.clone(),
            source,
        })?;
    let (_, body) = split_frontmatter(&raw);
    let mut out = skill_block(&skill.name, &skill.path, &skill.base_dir, js_trim(&body));
    let args = js_trim(args);
    if !args.is_empty() {
        out.push_str("\n\n");
        out.push_str(args);
    }
    Ok(out)
}

/// The `<skill>` wrapper pi 1.6.0 sends (no escaping).
pub fn skill_block(name: &str, path: &Path, base_dir: &Path, body: &str) -> String {
    format!(
        "<skill name=\"{name}\" location=\"{}\">\nReferences are relative to {}.\n\n{body}\n</skill>",
        path.display(),
        base_dir.display()
    )
}

/// Splits template arguments like pi 1.6.0 (see the module docs).
pub fn split_args(s: &str) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    let n = chars.len();
    let mut args = Vec::new();
    let mut i = 0;
    while i < n {
        if is_js_space(chars[i]) {
            i += 1;
            continue;
        }
        let mut arg = String::new();
        let c = chars[i];
        if c == '"' || c == '\'' {
            let close = (i + 1..n).find(|&j| chars[j] == c && chars[j - 1] != '\\');
            match close {
                Some(j) => {
                    let mut k = i + 1;
                    while k < j {
                        if chars[k] == '\\' && k + 1 < j && chars[k + 1] == c {
                            arg.push(c);
                            k += 2;
                        } else {
                            arg.push(chars[k]);
                            k += 1;
                        }
                    }
                    i = j + 1;
                }
                None => {
                    arg.push(c);
                    i += 1;
                }
            }
        }
        while i < n && !is_js_space(chars[i]) {
            arg.push(chars[i]);
            i += 1;
        }
        args.push(arg);
    }
    args
}

fn placeholder_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        // Alternatives are tried in order at each position (leftmost-first).
        Regex::new(concat!(
            r"\$\{(\d+):-([^}]*)\}",
            r"|\$\{(?:@|ARGUMENTS):-([^}]*)\}",
            r"|\$\{@:(\d+)(?::(\d+))?\}",
            r"|\$ARGUMENTS",
            r"|\$@",
            r"|\$(\d+)",
        ))
        .unwrap_or_else(|e| unreachable!("constant regex: {e}"))
    })
}

/// A decimal from the template; too large to count means "past the end".
fn num(s: &str) -> usize {
    s.parse().unwrap_or(usize::MAX)
}

/// Replaces the placeholders in `template` with `args`, in one pass.
pub fn substitute_args(template: &str, args: &[String]) -> String {
    let all = args.join(" ");
    let positional = |n: usize| -> &str {
        n.checked_sub(1)
            .and_then(|i| args.get(i))
            .map_or("", String::as_str)
    };
    placeholder_re()
        .replace_all(template, |c: &Captures| -> String {
            if let (Some(n), Some(d)) = (c.get(1), c.get(2)) {
                let v = positional(num(n.as_str()));
                return if v.is_empty() { d.as_str() } else { v }.to_string();
            }
            if let Some(d) = c.get(3) {
                return if all.is_empty() { d.as_str() } else { &all }.to_string();
            }
            if let Some(start) = c.get(4) {
                let from = num(start.as_str()).max(1) - 1;
                let to = c
                    .get(5)
                    .map_or(usize::MAX, |l| from.saturating_add(num(l.as_str())));
                let to = to.min(args.len());
                return args.get(from..to).map_or(String::new(), |s| s.join(" "));
            }
            if let Some(n) = c.get(6) {
                return positional(num(n.as_str())).to_string();
            }
            // `$ARGUMENTS` or `$@`.
            all.clone()
        })
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tpl(name: &str, content: &str) -> PromptTemplate {
        let mut t: PromptTemplate = serde_json::from_value(serde_json::json!({
            "name": name, "path": format!("/p/{name}.md"), "source": "project", "scope": "project",
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        t.content = content.into();
        t
    }

    #[test]
    fn splits_like_pi() {
        let a = |s: &str| split_args(s);
        assert_eq!(a(r#""a b" c"#), ["a b", "c"]);
        assert_eq!(a(r#""the \"fast\" path""#), [r#"the "fast" path"#]);
        assert_eq!(a("doesn't work"), ["doesn't", "work"]);
        assert_eq!(a(r#""abc def"#), ["\"abc", "def"]);
        assert_eq!(a(r#""" b"#), ["", "b"]);
        assert_eq!(a(r#""a""b" c"#), ["a\"b\"", "c"]);
        assert_eq!(a("a\u{3000}b"), ["a", "b"]);
        assert!(a("   ").is_empty());
    }

    #[test]
    fn substitutes_in_one_pass() {
        let args: Vec<String> = ["$2", "b"].iter().map(|s| s.to_string()).collect();
        assert_eq!(substitute_args("[${@:1}] [$2]", &args), "[$2 b] [b]");
        assert_eq!(substitute_args("${3:-x}${1}$0", &args), "x${1}");
        assert_eq!(substitute_args("${@:2:99999999999999999999}", &args), "b");
        assert_eq!(substitute_args("${@:-none}", &[]), "none");
    }

    struct Eat;
    impl InputHooks for Eat {
        fn command(&mut self, input: &str) -> HookOutcome {
            if input == "/eat" {
                HookOutcome::Handled
            } else {
                HookOutcome::Continue
            }
        }
        fn input(&mut self, input: &str) -> HookOutcome {
            HookOutcome::Rewritten(input.replace("/alias", "/t"))
        }
    }

    #[test]
    fn hooks_come_first() {
        let t = [tpl("t", "T[$1]"), tpl("eat", "never")];
        let e = expand_input("/eat", &[], &t, &mut Eat);
        assert_eq!(e.kind, ExpansionKind::Command);
        assert_eq!(e.text, None);
        let e = expand_input("/alias x", &[], &t, &mut Eat);
        assert_eq!(e.kind, ExpansionKind::Template { name: "t".into() });
        assert_eq!(e.text.as_deref(), Some("T[x]"));
        assert!(e.rewritten);
        let json = serde_json::to_value(&e).unwrap_or_default();
        assert_eq!(
            json,
            serde_json::json!({"kind": "template", "name": "t", "text": "T[x]", "rewritten": true})
        );
        let e = expand_input("/nope x", &[], &t, &mut NoHooks);
        assert_eq!(e.kind, ExpansionKind::Plain);
        assert_eq!(e.text.as_deref(), Some("/nope x"));
    }

    #[test]
    fn unreadable_skill_falls_through() {
        let s: Skill = serde_json::from_value(serde_json::json!({
            "name": "gone", "description": "d", "path": "/nonexistent/gone/SKILL.md",
            "baseDir": "/nonexistent/gone", "source": "project", "scope": "project",
            "disableModelInvocation": false,
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        let e = expand_input("/skill:gone x", &[s], &[], &mut NoHooks);
        assert_eq!(e.kind, ExpansionKind::Plain);
        assert_eq!(e.text.as_deref(), Some("/skill:gone x"));
        assert!(e.warning.is_some());
    }

    #[test]
    fn frontmatter_rules() {
        assert_eq!(split_frontmatter("---\na: 1\n---\n\n B \n").1, "B");
        assert_eq!(split_frontmatter("---\na: 1\nB\n").1, "---\na: 1\nB\n");
        assert_eq!(split_frontmatter("x\r\ny\r").1, "x\ny\n");
        // A BOM left after the reader dropped one is content, as in pi.
        assert_eq!(split_frontmatter("\u{feff}---\na\n---\nB").0, None);
        assert_eq!(split_frontmatter("---\na\n----\nB").1, "-\nB");
    }
}
