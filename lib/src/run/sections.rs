//! The system prompt a run sends: a subagent's exact prompt, a
//! `--system-from` prompt (refused when it was made for a trusted project
//! this run does not trust), or the sections planned from the resources
//! (with MCP's `mcp_servers` listing and the `--output-schema` format last);
//! and the [`Plan`] `pi-prompt` prints, the same sections and tools by
//! construction.

use std::sync::Arc;

use tokio::runtime::Runtime;

use super::assemble::Assembly;
use crate::cli::CliError;
use crate::prompt::plan::{plan_sections, PlanOptions};
use crate::prompt::toolkit_docs;
use crate::resources::Resources;
use crate::tools::Tool;

/// The `--output-schema` section (the answer's format) goes last.
pub(super) fn push_format(sections: &mut Vec<(String, String)>, text: Option<&str>) {
    if let Some(t) = text {
        sections.push(("output_format".to_string(), t.to_string()));
    }
}

/// What a run would send first: its system-prompt sections and declared
/// tools (`pi-prompt system`), and the session it read (`pi-prompt diff`).
pub struct Plan {
    pub sections: Vec<(String, String)>,
    pub tools: Vec<Arc<dyn Tool>>,
    /// The resources the prompt was planned from (`pi-prompt expand`).
    pub resources: Resources,
    pub session: crate::session::Session,
    /// The trust decision the prompt was planned under (`pi-prompt
    /// system` passes it on, so `pi-run --system-from` can check its own).
    pub trust: Option<crate::format::resources::TrustRecord>,
}

impl Assembly {
    /// The system-prompt sections: a subagent's exact prompt, a
    /// `--system-from` prompt, or the planned sections (with MCP's
    /// `mcp_servers` listing); with extensions, the plan is kept so
    /// `setActiveTools` and late registrations rebuild it.
    pub(super) fn plan_sections(&self) -> Result<Vec<(String, String)>, CliError> {
        if let Some(exact) = &self.selection.exact_prompt {
            return Ok(if exact.is_empty() {
                Vec::new()
            } else {
                vec![("preamble".to_string(), exact.clone())]
            });
        }
        if let Some(src) = &self.opts.system_from {
            let (mut sections, made_trusted) = super::input::sections_from(src, self.opts.prog)?;
            // A prompt listing a trusted project's skills and templates is
            // refused by a run that does not trust the project: `/skill:x`
            // would reach the model unexpanded. Trust is never taken from
            // a file; the run decides it, so it is asked for here too.
            if made_trusted == Some(true) && !self.trusted {
                return Err(CliError::input(format!(
                    "--system-from {src}: the prompt was made for a trusted project, but this run does not trust {}",
                    self.cwd.display()
                ))
                .with_hint(
                    "pass -a to pi-run too (pi-resources -a | pi-prompt system | pi-run -a --system-from -): trust is decided by each run, never read from its input",
                ));
            }
            let format = self.output.as_ref().map(|o| o.instructions());
            push_format(&mut sections, format.as_deref());
            return Ok(sections);
        }
        let plan = PlanOptions {
            cwd: self.cwd.display().to_string(),
            tools: crate::agent::prompt_tools(&self.tools),
            system_prompt: self.opts.system_prompt.clone(),
            append: self.opts.append_system_prompt.clone(),
            docs: Some(toolkit_docs()),
            chat_only: self.chat_only,
        };
        let mut sections = plan_sections(&plan, &self.resources).map_err(CliError::input)?;
        let mcp_section = self.mcp.as_ref().and_then(|m| m.servers_section());
        crate::mcp::push_section(&mut sections, mcp_section.as_ref());
        let format = self.output.as_ref().map(|o| o.instructions());
        push_format(&mut sections, format.as_deref());
        if self.has_exts {
            let res = self.resources.clone();
            self.runner.set_prompt_builder(Some(Arc::new(move |tools| {
                let plan = PlanOptions {
                    tools: crate::agent::prompt_tools(tools),
                    ..plan.clone()
                };
                let mut sections = plan_sections(&plan, &res)?;
                crate::mcp::push_section(&mut sections, mcp_section.as_ref());
                push_format(&mut sections, format.as_deref());
                Ok(sections)
            })));
        }
        Ok(sections)
    }

    /// The prompt and tools a run would declare first; everything started
    /// for the assembly is stopped.
    pub fn into_plan(self, rt: &Runtime) -> Plan {
        self.shutdown(rt);
        Plan {
            sections: self.sections,
            tools: self.tools,
            resources: self.resources,
            session: self.store.session,
            trust: self.decision,
        }
    }
}
