//! The `skills` system-prompt section: the `<available_skills>` list that
//! tells the model which SKILL.md files it may load, as pi 1.6.0 renders it.
//!
//! Observed on pi 1.6.0 (black box, `tests/fixtures/expand/cases.json`):
//! the section exists only when the `read` or `bash` tool is active and at
//! least one skill lacks `disable-model-invocation`; the loading hint names
//! the read tool when it is active, else bash; skills appear in the order
//! given (pi's discovery order, not sorted by name); name, description and
//! location are XML-escaped (`& < > " '`), newlines kept. pi stores it as
//! `<skills>\n{body}\n</skills>` (see [`super::wrap`]).

use crate::format::resources::Skill;

/// The section body (without the `<skills>` tags), or `None` when pi would
/// omit the section.
pub fn skills_section(skills: &[Skill], active_tool_names: &[&str]) -> Option<String> {
    let has_read = active_tool_names.contains(&"read");
    let has_bash = active_tool_names.contains(&"bash");
    if !has_read && !has_bash {
        return None;
    }
    let visible: Vec<&Skill> = skills
        .iter()
        .filter(|s| !s.disable_model_invocation)
        .collect();
    if visible.is_empty() {
        return None;
    }
    let how = if has_read {
        "Use the read tool to load a skill's file when the task matches its description."
    } else {
        "Use bash to load a skill's file when the task matches its description."
    };
    let mut lines = vec![
        "The following skills provide specialized instructions for specific tasks.".to_string(),
        how.to_string(),
        "Resolve relative paths against the skill's directory (parent of SKILL.md). Use absolute paths in tool calls.".to_string(),
        String::new(),
        "<available_skills>".to_string(),
    ];
    for s in visible {
        lines.push("  <skill>".into());
        lines.push(format!("    <name>{}</name>", escape_xml(&s.name)));
        lines.push(format!(
            "    <description>{}</description>",
            escape_xml(&s.description)
        ));
        lines.push(format!(
            "    <location>{}</location>",
            escape_xml(&s.path.to_string_lossy())
        ));
        lines.push("  </skill>".into());
    }
    lines.push("</available_skills>".into());
    Some(lines.join("\n"))
}

/// XML-escapes `& < > " '` as pi does.
pub fn escape_xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skill(name: &str, hidden: bool) -> Skill {
        serde_json::from_value(serde_json::json!({
            "name": name, "description": "a < b", "path": format!("/s/{name}/SKILL.md"),
            "baseDir": format!("/s/{name}"), "source": "user", "scope": "user",
            "disableModelInvocation": hidden,
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn gated_on_tools_and_visibility() {
        let s = [skill("x", false)];
        assert!(skills_section(&s, &["edit"]).is_none());
        assert!(skills_section(&[skill("h", true)], &["read"]).is_none());
        let bash = skills_section(&s, &["bash"]).unwrap_or_default();
        assert!(bash.contains("\nUse bash to load"));
        let read = skills_section(&s, &["bash", "read"]).unwrap_or_default();
        assert!(read.contains("\nUse the read tool to load"));
        assert!(read.ends_with(
            "    <description>a &lt; b</description>\n    <location>/s/x/SKILL.md</location>\n  </skill>\n</available_skills>"
        ));
    }
}
