//! A tool an extension registered, as one of the agent's tools: `execute`
//! becomes an `execute` request to the extension's process, its `update`
//! records become `tool_execution_update`s, its `result` the tool's output,
//! a thrown error an error result; an abort sends `cancel` and returns at
//! once.

use std::sync::Arc;

use serde_json::Value;

use super::host::{Host, HostError};
use crate::format::extension::{Ctx, HostRecord, ToolSpec};
use crate::format::tool::ToolDefinition;
use crate::format::ContentBlock;
use crate::tools::{Tool, ToolContext, ToolFuture, ToolOutput, UpdateSink};

/// Where an execution's context snapshot comes from (the extensions'
/// runner, which knows the agent's state).
pub trait ContextSource: Send + Sync {
    /// The snapshot an `execute` request carries.
    fn ctx(&self) -> Ctx;
}

pub struct ExtensionTool {
    pub host: Arc<Host>,
    pub ext: usize,
    pub path: String,
    pub spec: ToolSpec,
    pub context: Arc<dyn ContextSource>,
}

/// `{content, details?, isError?, structuredContent?}` as a tool output.
fn output(v: &Value) -> Result<ToolOutput, String> {
    let content = match v.get("content") {
        Some(c) => serde_json::from_value::<Vec<ContentBlock>>(c.clone())
            .map_err(|e| format!("invalid content: {e}"))?,
        None => Vec::new(),
    };
    let is_error = v.get("isError").and_then(Value::as_bool) == Some(true);
    Ok(ToolOutput {
        content,
        details: v.get("details").cloned(),
        is_error,
        structured: v.get("structuredContent").cloned(),
        flag_error: is_error,
    })
}

impl Tool for ExtensionTool {
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

    fn execute<'a>(
        &'a self,
        args: Value,
        ctx: ToolContext,
        mut on_update: UpdateSink,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            let (utx, mut urx) = tokio::sync::mpsc::unbounded_channel::<Value>();
            let snapshot = self.context.ctx();
            let req = self.host.request(
                |id| HostRecord::Execute {
                    id,
                    ext: self.ext,
                    tool: self.spec.name.clone(),
                    tool_call_id: ctx.tool_call_id.clone(),
                    params: args,
                    ctx: snapshot,
                },
                Some(utx),
                None,
                &ctx.cancel,
            );
            tokio::pin!(req);
            let answer = loop {
                tokio::select! {
                    a = &mut req => break a,
                    Some(p) = urx.recv() => {
                        if let Ok(o) = output(&p) {
                            on_update(o);
                        }
                    }
                }
            };
            match answer {
                Ok(v) => output(&v).unwrap_or_else(|e| {
                    ToolOutput::error(format!(
                        "Extension {} returned an invalid result for {}: {e}",
                        self.path, self.spec.name
                    ))
                }),
                Err(HostError::Failed(msg)) => ToolOutput::error(msg),
                Err(HostError::Aborted) => ToolOutput::error("Operation aborted"),
                Err(HostError::Dead(_)) | Err(HostError::Timeout) => {
                    ToolOutput::error(format!("Extension {} is not running", self.path))
                }
            }
        })
    }
}
