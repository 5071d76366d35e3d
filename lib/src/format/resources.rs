//! Resources as `pi-resources` reports them and the prompt builder uses
//! them: skills, prompt templates, themes, extensions, context files and
//! system-prompt files, each with where it came from; plus diagnostics.
//!
//! Every record serialises as one flat JSONL object tagged by `type`.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Where a resource was found, in precedence order (first wins).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// `-e`, `--skill`, `--prompt-template`, `--theme`.
    Cli,
    /// Paths listed in the project's `.pi/settings.json`.
    ProjectSettings,
    /// `<cwd>/.pi/{skills,prompts,themes,extensions}`, `.agents/skills`.
    Project,
    /// Paths listed in the global `settings.json`.
    UserSettings,
    /// `<agentDir>/{skills,prompts,themes,extensions}`, `~/.agents/skills`.
    User,
    /// A pi package named in settings.
    Package,
    /// Shipped with the toolkit.
    Builtin,
}

/// `project` or `user` (pi's "location"): which settings scope it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    Project,
    User,
    Path,
}

/// A skill (`SKILL.md` with frontmatter).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// The SKILL.md file.
    pub path: PathBuf,
    /// Its folder (relative paths in the skill resolve against it).
    #[serde(rename = "baseDir")]
    pub base_dir: PathBuf,
    pub source: Source,
    pub scope: Scope,
    /// `disable-model-invocation: true`: not listed in the system prompt,
    /// still usable as `/skill:name`.
    #[serde(rename = "disableModelInvocation")]
    pub disable_model_invocation: bool,
    /// The package it came from (its settings source), for `package`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<String>,
    /// Other frontmatter keys, kept.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub frontmatter: Map<String, Value>,
}

/// A prompt template (`prompts/*.md`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptTemplate {
    /// File name without `.md`; invoked as `/name`.
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(
        rename = "argumentHint",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub argument_hint: Option<String>,
    pub path: PathBuf,
    pub source: Source,
    pub scope: Scope,
    /// The body (frontmatter removed).
    #[serde(skip)]
    pub content: String,
    /// The package it came from (its settings source), for `package`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<String>,
}

/// A theme (`themes/*.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Theme {
    pub name: String,
    pub path: PathBuf,
    pub source: Source,
    pub scope: Scope,
    /// The package it came from (its settings source), for `package`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<String>,
}

/// An extension (recorded; executed by a later stage).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Extension {
    pub name: String,
    pub path: PathBuf,
    pub source: Source,
    pub scope: Scope,
    /// The package it came from (its settings source), for `package`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<String>,
    /// What it registered, `{tools, commands, flags}` (names), when it was
    /// loaded to find out (`pi-resources --inspect`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registered: Option<serde_json::Value>,
}

/// A context file (AGENTS.md / CLAUDE.md …), in load order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextFileRecord {
    pub path: PathBuf,
    /// `global` or `project`.
    pub scope: String,
    pub bytes: u64,
}

/// A problem with one resource; everything else still loads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceDiagnostic {
    /// `collision`, `invalid`, `unreadable`, `warning`, …
    pub kind: String,
    /// `skill`, `prompt`, `theme`, `extension`, `context`, `settings`, `package`.
    #[serde(rename = "resourceType")]
    pub resource_type: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// For collisions: the resource that won.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub winner: Option<PathBuf>,
    /// For collisions: the contested name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// `SYSTEM.md` (replaces the default prompt) or `APPEND_SYSTEM.md`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SystemPromptFile {
    /// `system` or `append`.
    pub kind: String,
    pub path: PathBuf,
    /// `global` or `project`.
    pub scope: String,
}

/// The project-trust decision as `pi-resources` prints it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrustRecord {
    /// `trusted` or `untrusted`.
    pub decision: String,
    pub trusted: bool,
    /// Why: `cli`, `no_protected_resources`, `hook`, `saved`,
    /// `default_setting`, `non_interactive`, `prompt`, or `error`.
    pub reason: String,
    /// The protected paths that made a decision necessary.
    #[serde(rename = "protectedPaths", default)]
    pub protected_paths: Vec<PathBuf>,
    /// The trust.json key that decided, for `saved`.
    #[serde(rename = "savedPath", default, skip_serializing_if = "Option::is_none")]
    pub saved_path: Option<PathBuf>,
    /// Why no decision could be made (the project is then untrusted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The tools a run with the same flags and settings would declare (the
/// library's one tool-set resolver decides, for pi-run, pi-prompt and
/// pi-resources alike).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSetRecord {
    /// Active tool names, in the order they are declared to the model.
    pub tools: Vec<String>,
    /// Chat only (an empty tool selection): no tools and no resources,
    /// the context files are the whole prompt.
    #[serde(rename = "chatOnly", default)]
    pub chat_only: bool,
    /// `default` (defaults, `defaultTools`, `+/-`, `-nt`, `-xt`), `request`
    /// (`--tools` list, `--chat-only`), `session` or `subagent` (a pin).
    pub source: String,
}

/// A configured MCP server as `pi-resources` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpServerRecord {
    pub name: String,
    /// The mcp.json the entry came from.
    pub source: PathBuf,
    /// `global` or `project`.
    pub scope: String,
    /// `loaded`, `disabled`, or `skipped` (an untrusted project's file).
    pub status: String,
    /// `stdio` or `http`.
    pub transport: String,
    /// The server's `exposure` as configured.
    pub exposure: String,
    /// With `--inspect`: the tool names the model would see, each with its
    /// exposure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<McpToolRecord>>,
    /// With `--inspect`: why it could not connect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One tool of an inspected MCP server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpToolRecord {
    pub name: String,
    pub exposure: String,
}

/// One line of `pi-resources` output, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ResourceRecord {
    Trust(TrustRecord),
    ToolSet(ToolSetRecord),
    Extension(Extension),
    Skill(Skill),
    Prompt(PromptTemplate),
    Theme(Theme),
    ContextFile(ContextFileRecord),
    SystemPrompt(SystemPromptFile),
    McpServer(McpServerRecord),
    Diagnostic(ResourceDiagnostic),
}
