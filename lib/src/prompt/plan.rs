//! The one place that turns resources, tools and flags into the desired
//! system-prompt sections — shared by `pi-run`, `pi-prompt system` and
//! `pi-prompt diff`, so the pipeline and the single binary agree byte for
//! byte.
//!
//! Chat only: an explicitly empty tool selection is a resource
//! policy. No skills, templates, extensions or base prompt: the exact system
//! prompt is the context files' contents joined by a blank line, in
//! discovery order, with no prefix, suffix or cwd. It is recorded as the
//! only section (`preamble`), so replaying the session gives exactly that
//! text, and it is rebuilt before every turn like any other prompt.

use std::path::Path;

use crate::format::resources::Skill;
use crate::resources::Resources;

use super::{build_sections, skills::skills_section, ContextFile, PromptInputs, PromptTool};

/// Everything the sections depend on.
#[derive(Debug, Clone, Default)]
pub struct PlanOptions {
    pub cwd: String,
    /// Active tools (for the tools, rules and skills sections).
    pub tools: Vec<PromptTool>,
    /// `--system-prompt` as given (replaces SYSTEM.md): text, or the path
    /// of a file (relative to `cwd`) whose contents are the text.
    pub system_prompt: Option<String>,
    /// `--append-system-prompt` values as given (replace APPEND_SYSTEM.md),
    /// each text or a file path like `system_prompt`.
    pub append: Vec<String>,
    /// The docs section body.
    pub docs: Option<String>,
    /// Chat only: see the module docs.
    pub chat_only: bool,
}

/// Reads the context files `resources` found, in order (an unreadable file
/// is skipped with its error).
pub fn read_context_files(resources: &Resources) -> (Vec<ContextFile>, Vec<String>) {
    let mut files = Vec::new();
    let mut errors = Vec::new();
    for c in &resources.context_files {
        match crate::resources::text::read(&c.path) {
            Ok(content) => files.push(ContextFile {
                path: c.path.clone(),
                content,
            }),
            Err(e) => errors.push(format!("{}: {e}", c.path.display())),
        }
    }
    (files, errors)
}

/// The exact Chat-only prompt: context files joined by "\n\n".
pub fn chat_only_prompt(files: &[ContextFile]) -> String {
    files
        .iter()
        .map(|f| f.content.as_str())
        .collect::<Vec<_>>()
        .join("\n\n")
}

fn read(path: &Path) -> Result<String, String> {
    crate::resources::text::read(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// A prompt flag's value, as pi reads it: the path of an existing file
/// (relative to `cwd`) means the file's contents; anything else (several
/// lines, very long, no such file) is the text itself.
pub fn text_or_file(value: &str, cwd: &Path) -> Result<String, String> {
    let p = cwd.join(value);
    if !value.contains('\n') && value.len() < 4096 && p.is_file() {
        return read(&p);
    }
    Ok(value.to_string())
}

/// The desired sections, in order. Errors name an unreadable prompt file.
pub fn plan_sections(
    opts: &PlanOptions,
    resources: &Resources,
) -> Result<Vec<(String, String)>, String> {
    let (context_files, _errors) = read_context_files(resources);
    if opts.chat_only {
        let exact = chat_only_prompt(&context_files);
        return Ok(if exact.is_empty() {
            Vec::new()
        } else {
            vec![("preamble".into(), exact)]
        });
    }
    let custom_prompt = match (&opts.system_prompt, &resources.system_prompt) {
        (Some(p), _) => Some(text_or_file(p, Path::new(&opts.cwd))?),
        (None, Some(f)) => Some(read(&f.path)?),
        (None, None) => None,
    };
    let append = if opts.append.is_empty() {
        resources
            .append_system_prompt
            .iter()
            .map(|f| read(&f.path))
            .collect::<Result<Vec<_>, _>>()?
    } else {
        opts.append
            .iter()
            .map(|a| text_or_file(a, Path::new(&opts.cwd)))
            .collect::<Result<Vec<_>, _>>()?
    };
    let names: Vec<&str> = opts.tools.iter().map(|t| t.name.as_str()).collect();
    let visible: Vec<Skill> = resources.skills.clone();
    let inputs = PromptInputs {
        cwd: opts.cwd.clone(),
        custom_prompt,
        append,
        tools: opts.tools.clone(),
        context_files,
        docs: opts.docs.clone(),
        skills: skills_section(&visible, &names),
    };
    Ok(build_sections(&inputs))
}
