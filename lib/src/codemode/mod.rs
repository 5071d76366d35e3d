//! Codemode, as pi 1.6.0 runs it: the `codemode` tool runs model-written
//! JavaScript in an embedded QuickJS ([`engine`], one thread and one fresh
//! runtime per script, no Node, file system, network or timers) whose only
//! way out is `tools.<name>(args)`. Every such call goes back into the
//! agent loop through the call's [`crate::agent::nested::Host`], so it
//! passes the same gate as a call of the model (hooks, approval, the final
//! policy) and has its own events; only the script's output reaches the
//! model ([`output`]). The tool also brings the declarations ([`declare`]):
//! while it is active every other declared tool gets a `Codemode:` line
//! (`codemode.mode: on`) or leaves the model's declarations for the
//! codemode description (`only`). Values kept with `store()` live in the
//! session as `codemode-store` entries; [`catalog`] is what scripts can
//! reach and find.

pub mod catalog;
pub mod declare;
pub mod engine;
pub mod output;
mod run;
pub mod source;

use std::sync::{Arc, Mutex};

use serde_json::{json, Map, Value};

use crate::format::tool::ToolDefinition;
use crate::tools::{Tool, ToolContext, ToolFuture, UpdateSink};

pub use catalog::{Catalog, Namespace};

/// The tool's name.
pub const NAME: &str = "codemode";

/// Each script's VM may use this much memory.
pub const MEMORY_LIMIT: usize = 256 * 1024 * 1024;

/// `codemode.*` settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// `codemode.mode: "only"`: the other tools leave the declarations and
    /// are listed in the codemode description instead.
    pub only: bool,
    /// `codemode.inlineBudget`: estimated tokens (characters / 4) the
    /// description may spend on tool declarations.
    pub inline_budget: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            only: false,
            inline_budget: 3000,
        }
    }
}

impl Settings {
    /// From merged settings (`codemode.mode`, `codemode.inlineBudget`).
    pub fn from_values(values: &Map<String, Value>) -> Settings {
        let mut s = Settings::default();
        if let Some(Value::Object(c)) = values.get("codemode") {
            s.only = c.get("mode").and_then(Value::as_str) == Some("only");
            if let Some(b) = c.get("inlineBudget").and_then(Value::as_f64) {
                if b >= 0.0 {
                    s.inline_budget = b as u64;
                }
            }
        }
        s
    }
}

const DESCRIPTION: &str = "Run JavaScript that calls other tools. The input is raw JavaScript (not JSON, no code fence), run as an async function body in a QuickJS sandbox: top-level `await` and `return` work. No Node, file system, network, or timers.
- `await tools.<name>({ ...args })` resolves to a string, or an object if the tool's declaration says so, and rejects with an Error on failure. A tool whose declaration returns an object resolves on failure too when it returned that object; check its fields. Calls still running when the script ends are cancelled.
- Optional first line: `// @options: {\"max_output_tokens\": 10000, \"timeout_ms\": 60000}`

Globals:
- `text(value)`, `image(dataUrlOrImageBlock)`, `console.log(...)`, and top-level `return` add output; `exit()` ends the script. With several text items, each starts with a `==> text N/M <==` line, and `console` lines follow the other output in one `<console_output>` block. `image()` also saves the image to a temp file and the result names its path.
- `store(key, value)` and `load(key)` keep JSON values across codemode calls.
- `ALL_TOOLS`, `await searchTools(query, { limit?, namespace? })`, `await describeTool(name)`, `await describeNamespace(name)`: find unlisted tools, such as MCP tools.
- `models`: classifiers and image generation. Read ";

/// The grammar pi declares for the tool's input.
const GRAMMAR: &str = "\nstart: options_source | plain_source\noptions_source: OPTIONS_LINE NEWLINE SOURCE\nplain_source: SOURCE\n\nOPTIONS_LINE: /[ \\t]*\\/\\/ @options:[^\\r\\n]*/\nNEWLINE: /\\r?\\n/\nSOURCE: /[\\s\\S]+/\n";

/// The `codemode` tool.
pub struct CodemodeTool {
    catalog: Option<Arc<dyn Catalog>>,
    settings: Settings,
    /// Where the description sends the model for the script API.
    docs: String,
    /// Tools taken out of the declarations (`only`): listed in the
    /// description, callable from scripts.
    listed: Mutex<Vec<Arc<dyn Tool>>>,
}

impl CodemodeTool {
    pub fn new(catalog: Option<Arc<dyn Catalog>>, settings: Settings) -> CodemodeTool {
        CodemodeTool {
            catalog,
            settings,
            docs: "`man pi-run` (Codemode)".into(),
            listed: Mutex::new(Vec::new()),
        }
    }

    fn listed(&self) -> Vec<Arc<dyn Tool>> {
        self.listed.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// The "Nested tools" part of the description: the listed tools'
    /// script descriptions within the inline budget.
    fn nested_section(&self) -> String {
        let listed = self.listed();
        if listed.is_empty() {
            return String::new();
        }
        let budget = (self.settings.inline_budget * 4) as usize;
        let mut used = 0usize;
        let mut blocks = Vec::new();
        for e in catalog::entries(&listed, &[], None) {
            let block = format!("### `{}`\n{}", e.id, e.description);
            if used + block.len() > budget {
                continue;
            }
            used += block.len();
            blocks.push(block);
        }
        // (With nothing within the budget the heading stays alone, as pi
        // writes it.)
        if blocks.is_empty() {
            return "\n\nNested tools:".into();
        }
        format!("\n\nNested tools:\n\n{}", blocks.join("\n\n"))
    }
}

impl Tool for CodemodeTool {
    fn name(&self) -> std::borrow::Cow<'_, str> {
        NAME.into()
    }
    fn definition(&self) -> ToolDefinition {
        let mut extra = Map::new();
        extra.insert(
            "constrainedSampling".into(),
            json!({"type": "grammar", "variants": {"openai_lark": GRAMMAR}}),
        );
        ToolDefinition {
            name: NAME.into(),
            description: format!("{DESCRIPTION}{} first.{}", self.docs, self.nested_section()),
            parameters: json!({"type": "object", "required": ["code"], "properties": {
                "code": {"type": "string", "description": "Raw JavaScript source."}
            }}),
            extra,
        }
    }
    fn prompt_snippet(&self) -> Option<String> {
        Some("Run JavaScript that calls other tools".into())
    }
    fn prompt_guidelines(&self) -> Vec<String> {
        vec!["Use codemode to batch independent tool calls (Promise.allSettled), chain them, or filter large output, instead of many separate calls.".into()]
    }
    fn prepare_loadout(&self, declared: Vec<Arc<dyn Tool>>) -> Vec<Arc<dyn Tool>> {
        loadout(declared, self)
    }
    fn execute<'a>(
        &'a self,
        args: Value,
        ctx: ToolContext,
        on_update: UpdateSink,
    ) -> ToolFuture<'a> {
        Box::pin(run::execute(self, args, ctx, on_update))
    }
}

/// A declared tool with the `Codemode:` line on its description.
struct Noted {
    inner: Arc<dyn Tool>,
    note: String,
}

impl Tool for Noted {
    fn name(&self) -> std::borrow::Cow<'_, str> {
        self.inner.name()
    }
    fn definition(&self) -> ToolDefinition {
        let mut d = self.inner.definition();
        d.description.push_str(&self.note);
        d
    }
    fn prompt_snippet(&self) -> Option<String> {
        self.inner.prompt_snippet()
    }
    fn prompt_guidelines(&self) -> Vec<String> {
        self.inner.prompt_guidelines()
    }
    fn prepare_arguments(&self, args: Value) -> Value {
        self.inner.prepare_arguments(args)
    }
    fn output_schema(&self) -> Option<Value> {
        self.inner.output_schema()
    }
    fn execute<'a>(
        &'a self,
        args: Value,
        ctx: ToolContext,
        on_update: UpdateSink,
    ) -> ToolFuture<'a> {
        self.inner.execute(args, ctx, on_update)
    }
}

/// The declared tools while `codemode` is among them: with `on` every
/// other tool gets its `Codemode:` line; with `only` they leave the
/// declarations and the codemode description lists them. Without
/// `codemode` the tools are returned as they are.
pub fn loadout(tools: Vec<Arc<dyn Tool>>, codemode: &CodemodeTool) -> Vec<Arc<dyn Tool>> {
    if !tools.iter().any(|t| t.name().into_owned() == NAME) {
        return tools;
    }
    if codemode.settings.only {
        let (cm, others): (Vec<_>, Vec<_>) = tools
            .into_iter()
            .partition(|t| t.name().into_owned() == NAME);
        // (Again after a reconnect: the new tools join or replace the
        // listed ones.)
        if let Ok(mut l) = codemode.listed.lock() {
            for t in others {
                let name = t.name().into_owned();
                match l.iter().position(|x| x.name().into_owned() == name) {
                    Some(i) => l[i] = t,
                    None => l.push(t),
                }
            }
        }
        return cm;
    }
    tools
        .into_iter()
        .map(|t| {
            let name = t.name().into_owned();
            if name == NAME {
                return t;
            }
            let note =
                declare::codemode_line(&declare::identifier(&name), t.output_schema().as_ref());
            // (Presented once: a tool that has its line keeps it.)
            if t.definition().description.ends_with(&note) {
                return t;
            }
            Arc::new(Noted { inner: t, note }) as Arc<dyn Tool>
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(tools: &[Arc<dyn Tool>]) -> Vec<String> {
        tools.iter().map(|t| t.name().into_owned()).collect()
    }

    #[test]
    fn loadout_notes_or_lists_the_other_tools() {
        let builtins = crate::tools::select::builtin_tools(&["read".into(), "edit".into()]);
        let on = Arc::new(CodemodeTool::new(None, Settings::default()));
        let mut tools = builtins.clone();
        tools.push(on.clone());
        let declared = on.prepare_loadout(tools.clone());
        assert_eq!(names(&declared), ["read", "edit", "codemode"]);
        assert!(declared[1]
            .definition()
            .description
            .ends_with("\n\nCodemode: `tools.edit(args)` resolves to a string."));
        assert!(!on.definition().description.contains("Nested tools"));
        // Presented again (after a reconnect), nothing doubles.
        let again = on.prepare_loadout(declared.clone());
        assert_eq!(again[1].definition(), declared[1].definition());
        // Without codemode nothing changes.
        assert_eq!(
            names(&on.prepare_loadout(builtins.clone())),
            ["read", "edit"]
        );
        let only = Arc::new(CodemodeTool::new(
            None,
            Settings {
                only: true,
                inline_budget: 3000,
            },
        ));
        let mut tools = builtins.clone();
        tools.push(only.clone());
        assert_eq!(names(&only.prepare_loadout(tools)), ["codemode"]);
        let d = only.definition().description;
        assert!(
            d.contains("Nested tools:\n\n### `read`\n") && d.contains("### `edit`"),
            "{d}"
        );
        let none = Arc::new(CodemodeTool::new(
            None,
            Settings {
                only: true,
                inline_budget: 0,
            },
        ));
        let mut tools = builtins;
        tools.push(none.clone());
        none.prepare_loadout(tools);
        assert!(none
            .definition()
            .description
            .ends_with(" first.\n\nNested tools:"));
        let values: Map<String, Value> =
            serde_json::from_str(r#"{"codemode": {"mode": "only", "inlineBudget": 10}}"#).unwrap();
        let s = Settings::from_values(&values);
        assert_eq!(
            s,
            Settings {
                only: true,
                inline_budget: 10
            }
        );
    }
}
