//! The control tools as agent [`Tool`]s: each runs on its parent's
//! [`Controller`] (or only describes itself, for `pi-prompt`), and
//! [`join_control_tools`] adds them to a run's tool set as the tool flags
//! decide, suppressing a legacy `pi-subagents` extension and reporting a
//! collision with an unrelated extension's tool of the same name.

use std::sync::Arc;

use serde_json::Value;

use super::runtime::Controller;
use super::tools as st;
use super::{profiles, settings};
use crate::format::tool::ToolDefinition;
use crate::tools::{Tool, ToolContext, ToolFuture, ToolOutput, UpdateSink};

/// The control tools as a run declares them while the switch is on, for a
/// program that shows a run's prompt without running one (`pi-prompt`):
/// the same definitions, snippet and guidelines; calling one is an error.
pub fn described_tools(
    agent_dir: &std::path::Path,
    cwd: &std::path::Path,
    trusted: bool,
) -> Vec<Arc<dyn Tool>> {
    if !settings::is_enabled(&settings::settings_path(agent_dir)) {
        return Vec::new();
    }
    let profiles = profiles::list_sources(agent_dir, cwd, trusted).effective();
    st::control_tools(&profiles)
        .into_iter()
        .map(|spec| Arc::new(ControlTool { spec, c: None }) as Arc<dyn Tool>)
        .collect()
}

/// One of the three control tools (`c`: the runs it drives; none when it
/// only describes itself).
pub(super) struct ControlTool {
    pub(super) spec: crate::format::extension::ToolSpec,
    pub(super) c: Option<Arc<Controller>>,
}

impl Tool for ControlTool {
    fn name(&self) -> std::borrow::Cow<'_, str> {
        self.spec.name.as_str().into()
    }
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: self.spec.name.clone(),
            description: self.spec.description.clone(),
            parameters: self.spec.parameters.clone(),
            extra: serde_json::Map::new(),
        }
    }
    fn prompt_snippet(&self) -> Option<String> {
        self.spec.prompt_snippet.clone()
    }
    fn prompt_guidelines(&self) -> Vec<String> {
        self.spec.prompt_guidelines.clone()
    }
    fn execute<'a>(&'a self, args: Value, ctx: ToolContext, up: UpdateSink) -> ToolFuture<'a> {
        Box::pin(async move {
            let Some(c) = &self.c else {
                return ToolOutput::error("the subagent tools run only inside pi-run");
            };
            match self.spec.name.as_str() {
                "Agent" => c.agent(args, ctx, up).await,
                "get_subagent_result" => c.get_result(args, ctx).await,
                _ => c.steer(args),
            }
        })
    }
}

/// Joins the built-in's control tools to a run's tool set as the tool
/// flags decide (`sel`: they are an extension's tools to `-t`, `-xt` and
/// `-nt`, as pi-web's subagents are an extension): a legacy
/// `pi-subagents` extension's tools leave it (the built-in replaces it); an unrelated
/// extension that registered a control-tool name keeps it, the built-in's
/// tool of that name is left out, and the collision is returned as the
/// same line a file extension's conflict gives (`extension
/// <inline:pi-web-subagents>: Tool "<name>" conflicts with <path>;
/// skipped`): the built-in behaves as pi-web's hidden inline extension,
/// loaded after the file extensions, so its tools come after theirs.
pub fn join_control_tools(
    tools: &mut Vec<Arc<dyn Tool>>,
    control: Vec<Arc<dyn Tool>>,
    runner: &crate::extensions::runner::Runner,
    sel: &mut crate::tools::select::Selection,
) -> Vec<String> {
    use super::legacy::{legacy_paths, LoadedExtension};
    if control.is_empty() {
        return Vec::new();
    }
    let mut view: Vec<LoadedExtension> = runner
        .extensions()
        .iter()
        .map(|e| LoadedExtension {
            path: e.path.clone(),
            source: String::new(),
            tools: e.tools().into_iter().map(|t| t.name).collect(),
        })
        .collect();
    view.push(LoadedExtension {
        path: st::EXTENSION_PATH.into(),
        source: String::new(),
        tools: super::CONTROL_TOOL_NAMES
            .iter()
            .map(|s| s.to_string())
            .collect(),
    });
    let legacy = legacy_paths(&view);
    let mut warnings = Vec::new();
    let mut taken: Vec<String> = Vec::new();
    for e in view.iter().filter(|e| e.path != st::EXTENSION_PATH) {
        if legacy.contains(&e.path) {
            let gone: Vec<&String> = e
                .tools
                .iter()
                .filter(|t| !crate::tools::BUILTIN_TOOLS.contains(&t.as_str()))
                .collect();
            tools.retain(|t| !gone.contains(&&t.name().into_owned()));
            continue;
        }
        for name in e.tools.iter().filter(|t| super::is_control_tool(t)) {
            if !taken.contains(name) {
                // pi's conflict error lands on the later extension, and
                // the inline one loads after every file extension.
                warnings.push(format!(
                    "extension {}: Tool \"{name}\" conflicts with {}; skipped",
                    st::EXTENSION_PATH,
                    e.path
                ));
                taken.push(name.clone());
            }
        }
    }
    let existing: Vec<String> = tools.iter().map(|t| t.name().into_owned()).collect();
    for t in control {
        let name = t.name().into_owned();
        if taken.contains(&name) || existing.contains(&name) {
            continue;
        }
        // The tool flags treat them as any extension's tools.
        sel.add([crate::tools::select::AvailableTool::extension(&name, true)]);
        if sel.is_active(&name) {
            tools.push(t);
        }
    }
    warnings
}
