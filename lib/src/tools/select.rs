//! The active tool set of a run, decided in one place for `pi-run`,
//! `pi-prompt` and `pi-resources`: the tool flags (`-t/--tools`,
//! `-xt/--exclude-tools`, `-nt/--no-tools`, `-nbt/--no-builtin-tools`,
//! `--chat-only`), the `defaultTools` setting and a session's persisted
//! selection, applied to the tools that exist, exactly as pi
//! 1.6.0 applies them (every rule was observed by running pi against the
//! mock LLM and reading the `tools` it declared; `tests/oracle/FINDINGS.md`
//! §5). Tools carry their kind, so extension, MCP and subagent tools plug
//! in: pi registers them after its built-ins, and treats them alike.
//!
//! The order of the rules:
//! 1. A pinned selection (subagent snapshot, else the session's latest
//!    valid `pi-web:tool-selection`) chooses the built-ins and wins over
//!    every flag and setting; extension and subagent tools still join by
//!    their default (not under Chat only).
//! 2. `--chat-only`: no tools (and the Chat-only resource policy).
//! 3. A plain `--tools` list is an allowlist for every kind: exact names in
//!    the list's order, then every tool a `*` pattern matches, in registry
//!    order (built-ins first, then the tools that register later).
//! 4. Otherwise the defaults: built-ins from `defaultTools` (or read, bash,
//!    edit, write) unless `-nt` / `-nbt`; then `--tools` `+name` / `-name`
//!    entries in order; then the later tools active by default unless
//!    `-nt` (so `-name` never removes one of those, as in pi).
//! 5. `-xt` patterns remove tools last.
//!
//! [`Selection`] keeps one run's decision while its tools become known;
//! [`ToolCeiling`] is what it allows the agents the run delegates to.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use super::Tool;

/// What provides a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    /// read, bash, edit, write, grep, find, ls.
    Builtin,
    /// Registered by an extension (or an SDK host).
    Extension,
    /// Exposed by an MCP server (`mcp__<server>__<tool>`).
    Mcp,
}

/// A tool that could be activated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AvailableTool {
    pub name: String,
    pub kind: ToolKind,
    /// Active when nothing selects otherwise: pi's four default built-ins;
    /// extension tools registered active; directly exposed MCP tools.
    pub active_by_default: bool,
}

impl AvailableTool {
    /// An extension's tool (also a subagent control tool: pi-web's
    /// subagents are an extension).
    pub fn extension(name: &str, active_by_default: bool) -> AvailableTool {
        AvailableTool {
            name: name.to_string(),
            kind: ToolKind::Extension,
            active_by_default,
        }
    }
}

/// The built-in tools in pi's registry order; read, bash, edit and write
/// are active by default.
pub fn builtin_available() -> Vec<AvailableTool> {
    super::BUILTIN_TOOLS
        .iter()
        .map(|n| AvailableTool {
            name: n.to_string(),
            kind: ToolKind::Builtin,
            active_by_default: super::DEFAULT_TOOLS.contains(n),
        })
        .collect()
}

/// The tool flags of one invocation, as given (clap parses them in each
/// binary; pi's rules are applied here).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolFlags {
    /// The last `-t/--tools` value (pi keeps only the last one).
    pub tools: Option<String>,
    /// The last `-xt/--exclude-tools` value.
    pub exclude: Option<String>,
    /// `-nt/--no-tools`.
    pub no_tools: bool,
    /// `-nbt/--no-builtin-tools`.
    pub no_builtin_tools: bool,
    /// `--chat-only`: an explicitly empty selection, pinned.
    pub chat_only: bool,
}

impl ToolFlags {
    /// Whether any tool flag was given.
    pub fn any(&self) -> bool {
        self.tools.is_some()
            || self.exclude.is_some()
            || self.no_tools
            || self.no_builtin_tools
            || self.chat_only
    }
}

/// The `defaultTools` setting after pi's user/project merge
/// ([`crate::settings::Settings::default_tools`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DefaultTools {
    /// Not set: read, bash, edit, write.
    Unset,
    /// The string entries of the list, as written (not trimmed; pi skips
    /// other entries).
    List(Vec<String>),
    /// Set to something that is not a list: pi then activates no built-in
    /// tool. The JSON type, for the warning.
    Invalid(&'static str),
}

impl DefaultTools {
    /// Reads the setting's value (`None`: absent).
    pub fn from_value(v: Option<&Value>) -> DefaultTools {
        match v {
            None => DefaultTools::Unset,
            Some(Value::Array(a)) => DefaultTools::List(
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect(),
            ),
            Some(Value::Null) => DefaultTools::Invalid("null"),
            Some(Value::Bool(_)) => DefaultTools::Invalid("a boolean"),
            Some(Value::Number(_)) => DefaultTools::Invalid("a number"),
            Some(Value::String(_)) => DefaultTools::Invalid("a string"),
            Some(Value::Object(_)) => DefaultTools::Invalid("an object"),
        }
    }
}

/// Who pinned a selection that wins over the flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PinSource {
    /// A subagent's resource snapshot (fixed by its profile).
    Subagent,
    /// The session's latest valid `pi-web:tool-selection` entry.
    Session,
}

/// A persisted selection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pinned {
    pub tools: Vec<String>,
    /// Chat only (an empty built-in selection with no resource loading).
    pub chat_only: bool,
    pub source: PinSource,
}

/// Where the active set came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolSource {
    /// A subagent's snapshot.
    Subagent,
    /// The session's pin.
    Session,
    /// `--chat-only` or a plain `--tools` list.
    Request,
    /// Defaults, `defaultTools`, `-nt`/`-nbt`, `+/-` entries, `-xt`.
    Default,
}

/// The resolved tool set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolSet {
    /// The active tools, in the order they are declared to the model.
    pub names: Vec<String>,
    /// Chat only: no resources besides context files.
    pub chat_only: bool,
    pub source: ToolSource,
    /// The built-in selection to pin in the session now (`--chat-only`, or
    /// a plain `--tools` list that selects at least one built-in tool).
    pub persist: Option<Vec<String>>,
    /// Things the user should know (unknown names, ignored flags).
    pub warnings: Vec<String>,
}

/// A tool flag pi rejects; the messages are pi 1.6.0's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectError {
    #[error("--tools: tool names cannot be mixed with +name or -name entries")]
    Mixed,
    #[error("--tools: +name and -name entries take exact tool names, not patterns: {0}")]
    PatternDelta(String),
}

/// `*` matches any run of characters; everything else is literal and
/// case-sensitive (pi has no `?` or `[...]`).
pub fn pattern_matches(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == name;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if name.len() < first.len() + last.len() || !name.starts_with(first) || !name.ends_with(last) {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

/// A CLI list: split on commas, trimmed, empty entries dropped.
fn cli_entries(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

fn is_delta(e: &str) -> bool {
    e.starts_with('+') || e.starts_with('-')
}

/// `--tools`, parsed: `Plain` (an allowlist, possibly empty) or `Delta`.
enum ToolsArg {
    Plain(Vec<String>),
    Delta(Vec<String>),
}

fn parse_tools(v: &str) -> Result<ToolsArg, SelectError> {
    let entries = cli_entries(v);
    let deltas = entries.iter().filter(|e| is_delta(e)).count();
    if deltas == 0 {
        return Ok(ToolsArg::Plain(entries));
    }
    if deltas < entries.len() {
        return Err(SelectError::Mixed);
    }
    if let Some(p) = entries.iter().find(|e| e.contains('*')) {
        return Err(SelectError::PatternDelta(p.clone()));
    }
    Ok(ToolsArg::Delta(entries))
}

fn push_unique(list: &mut Vec<String>, name: &str) {
    if !list.iter().any(|n| n == name) {
        list.push(name.to_string());
    }
}

fn names_list(available: &[AvailableTool]) -> String {
    available
        .iter()
        .map(|t| t.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `+name` / `-name` entries applied in order; unknown `+name`s are
/// ignored (with a warning).
fn apply_deltas(
    names: &mut Vec<String>,
    deltas: &[String],
    available: &[AvailableTool],
    what: &str,
    warnings: &mut Vec<String>,
) {
    for d in deltas {
        let name = &d[1..];
        if d.starts_with('+') {
            if available.iter().any(|t| t.name == name) {
                push_unique(names, name);
            } else {
                warnings.push(unknown(what, name, available));
            }
        } else {
            names.retain(|n| n != name);
        }
    }
}

fn unknown(what: &str, name: &str, available: &[AvailableTool]) -> String {
    format!(
        "{what}: no tool \"{name}\" here (available: {}); ignored",
        names_list(available)
    )
}

/// The built-in part of the default selection: `defaultTools` (plain
/// names form the selection, then `+`/`-` entries apply in order; a list
/// of only `+`/`-` entries changes read, bash, edit, write).
fn default_builtins(
    setting: &DefaultTools,
    available: &[AvailableTool],
    warnings: &mut Vec<String>,
) -> Vec<String> {
    let builtin_defaults = || -> Vec<String> {
        available
            .iter()
            .filter(|t| t.kind == ToolKind::Builtin && t.active_by_default)
            .map(|t| t.name.clone())
            .collect()
    };
    match setting {
        DefaultTools::Unset => builtin_defaults(),
        DefaultTools::Invalid(ty) => {
            warnings.push(format!(
                "settings.json: defaultTools is {ty}, not a list of tool names; no built-in tool is active (as in pi)"
            ));
            Vec::new()
        }
        DefaultTools::List(list) => {
            let plain: Vec<&String> = list.iter().filter(|e| !is_delta(e)).collect();
            let mut names = if plain.is_empty() && !list.is_empty() {
                builtin_defaults()
            } else {
                let mut v = Vec::new();
                for p in plain {
                    if available.iter().any(|t| &t.name == p) {
                        push_unique(&mut v, p);
                    } else {
                        warnings.push(unknown("settings.json defaultTools", p, available));
                    }
                }
                v
            };
            let deltas: Vec<String> = list.iter().filter(|e| is_delta(e)).cloned().collect();
            apply_deltas(
                &mut names,
                &deltas,
                available,
                "settings.json defaultTools",
                warnings,
            );
            names
        }
    }
}

/// Resolves the active tools (see the module header for the rules).
/// `available` is every tool that exists, in registry order.
pub fn resolve(
    flags: &ToolFlags,
    setting: &DefaultTools,
    pinned: Option<&Pinned>,
    available: &[AvailableTool],
) -> Result<ToolSet, SelectError> {
    let tools_arg = flags.tools.as_deref().map(parse_tools).transpose()?;
    let mut warnings = Vec::new();
    let mut source = ToolSource::Default;
    let mut persist = None;
    let mut names: Vec<String> = Vec::new();
    let exists = |n: &str| available.iter().any(|t| t.name == n);
    let later = || available.iter().filter(|t| t.kind != ToolKind::Builtin);
    if flags.chat_only {
        source = ToolSource::Request;
        persist = Some(Vec::new());
    } else if let Some(ToolsArg::Plain(entries)) = &tools_arg {
        source = ToolSource::Request;
        // An allowlist for every kind (observed with pi 1.6.0: `--tools
        // read,bash` declares no extension or MCP tool). The exact names
        // come first, in the list's order; then every tool a pattern
        // matches, in registry order (the built-ins, then the tools that
        // register later: extension, MCP, subagent tools), wherever the
        // pattern stood (`gr*,read` is `read, grep`, as in pi 1.6.0).
        let (patterns, exact): (Vec<&String>, Vec<&String>) =
            entries.iter().partition(|e| e.contains('*'));
        for e in exact {
            if exists(e) {
                push_unique(&mut names, e);
            } else {
                warnings.push(unknown("--tools", e, available));
            }
        }
        let builtins = available.iter().filter(|t| t.kind == ToolKind::Builtin);
        for t in builtins.chain(later()) {
            if patterns.iter().any(|e| pattern_matches(e, &t.name)) {
                push_unique(&mut names, &t.name);
            }
        }
    } else {
        if !flags.no_tools && !flags.no_builtin_tools {
            names = default_builtins(setting, available, &mut warnings);
        }
        // `+name` / `-name` change the built-in start (a `+name` of any
        // kind lands here, in order); the tools that register later and
        // are active by default follow unless `-nt`, so `-name` does not
        // remove one of them (pi 1.6.0).
        if let Some(ToolsArg::Delta(deltas)) = &tools_arg {
            apply_deltas(&mut names, deltas, available, "--tools", &mut warnings);
        }
        if !flags.no_tools {
            for t in later().filter(|t| t.active_by_default) {
                push_unique(&mut names, &t.name);
            }
        }
    }
    names.retain(|n| !excluded(flags, n));
    if source == ToolSource::Request && !flags.chat_only {
        let builtins: Vec<String> = names
            .iter()
            .filter(|n| {
                available
                    .iter()
                    .any(|t| &t.name == *n && t.kind == ToolKind::Builtin)
            })
            .cloned()
            .collect();
        // An empty pin would mean Chat only; a list that selects no
        // built-in tool just runs without them, as pi does.
        persist = (!builtins.is_empty()).then_some(builtins);
    }
    let unpinned = ToolSet {
        names,
        chat_only: flags.chat_only,
        source,
        persist,
        warnings,
    };
    let Some(pin) = pinned else {
        return Ok(unpinned);
    };
    let is_builtin = |n: &String| {
        available
            .iter()
            .any(|t| &t.name == n && t.kind == ToolKind::Builtin)
    };
    let mut warnings = Vec::new();
    let flag_builtins: Vec<&String> = unpinned.names.iter().filter(|n| is_builtin(n)).collect();
    if flags.any() && flag_builtins != pin.tools.iter().collect::<Vec<_>>() {
        let what = if pin.chat_only {
            "Chat only".to_string()
        } else {
            pin.tools.join(", ")
        };
        warnings.push(match pin.source {
            PinSource::Session => format!(
                "this session pins its tools ({what}); the tool flags are ignored (change it with pi-session select-tool)"
            ),
            PinSource::Subagent => format!(
                "this subagent session's tools are fixed by its profile ({what}); the tool flags are ignored"
            ),
        });
    }
    // A pin chooses the built-in tools. Extension and subagent tools still
    // join by their default (Chat only has none); MCP tools do not.
    let mut names = pin.tools.clone();
    if !pin.chat_only {
        for t in available
            .iter()
            .filter(|t| t.kind == ToolKind::Extension && t.active_by_default)
        {
            push_unique(&mut names, &t.name);
        }
    }
    Ok(ToolSet {
        names,
        chat_only: pin.chat_only,
        source: match pin.source {
            PinSource::Session => ToolSource::Session,
            PinSource::Subagent => ToolSource::Subagent,
        },
        persist: None,
        warnings,
    })
}

/// One run's tool decision, kept while its tools become known: the
/// built-ins and MCP tools first, then each extension's tools as it
/// registers them, then the subagent control tools. Every question —
/// which tools start active, in which order, what to warn about — is
/// answered by [`resolve`] over the tools known so far, so an extension
/// tool or `Agent` obeys `-nt`, `-t` and `-xt` exactly as pi 1.6.0 treats
/// an extension's tool, and a name is only "not here" when no tool of that
/// name exists at all.
#[derive(Debug, Clone)]
pub struct Selection {
    pub flags: ToolFlags,
    pub setting: DefaultTools,
    pub pinned: Option<Pinned>,
    known: Vec<AvailableTool>,
}

impl Selection {
    pub fn new(flags: ToolFlags, setting: DefaultTools, pinned: Option<Pinned>) -> Selection {
        Selection {
            flags,
            setting,
            pinned,
            known: Vec::new(),
        }
    }

    /// Tools that exist from now on, after those known (registry order).
    /// A name known already keeps its place (an extension tool named like
    /// a built-in replaces its object, not its place).
    pub fn add(&mut self, tools: impl IntoIterator<Item = AvailableTool>) {
        for t in tools {
            if !self.known.iter().any(|k| k.name == t.name) {
                self.known.push(t);
            }
        }
    }

    /// The decision over the tools known so far.
    pub fn resolve(&self) -> Result<ToolSet, SelectError> {
        resolve(
            &self.flags,
            &self.setting,
            self.pinned.as_ref(),
            &self.known,
        )
    }

    /// Whether `name` starts active (a flag error: nothing does).
    pub fn is_active(&self, name: &str) -> bool {
        self.resolve()
            .is_ok_and(|s| s.names.iter().any(|n| n == name))
    }

    /// Whether the flags let `name` be active at all: pi 1.6.0 filters the
    /// tools an extension activates (`setActiveTools`) through `-xt`, a
    /// plain `--tools` list and `-nt` (only `+name` entries pass), never
    /// through `-nbt` or `-name`. Under a pin the flags are ignored.
    pub fn admits(&self, name: &str) -> bool {
        if self.flags.chat_only || self.pinned.as_ref().is_some_and(|p| p.chat_only) {
            return false;
        }
        if self.pinned.is_some() {
            return true;
        }
        let Ok(arg) = self.flags.tools.as_deref().map(parse_tools).transpose() else {
            return false;
        };
        if excluded(&self.flags, name) {
            return false;
        }
        match arg {
            Some(ToolsArg::Plain(entries)) => entries.iter().any(|e| pattern_matches(e, name)),
            Some(ToolsArg::Delta(d)) if self.flags.no_tools => {
                d.iter().any(|e| e.strip_prefix('+') == Some(name))
            }
            _ => !self.flags.no_tools,
        }
    }

    /// The limit this run's tool choice sets for the agents it delegates
    /// to (see [`ToolCeiling`]).
    pub fn ceiling(&self) -> ToolCeiling {
        ToolCeiling {
            flags: self.flags.clone(),
            pinned: self.pinned.clone(),
        }
    }

    /// Once every tool is known: puts `tools` in the resolver's order when
    /// they are the resolver's set (an extension's `setActiveTools` keeps
    /// its own), and gives the warnings to print.
    pub fn finish(&self, tools: &mut [std::sync::Arc<dyn Tool>]) -> Vec<String> {
        let Ok(set) = self.resolve() else {
            return Vec::new();
        };
        let mut now: Vec<String> = tools.iter().map(|t| t.name().into_owned()).collect();
        let mut want = set.names.clone();
        now.sort();
        want.sort();
        if now == want {
            tools.sort_by_key(|t| {
                let n = t.name().into_owned();
                set.names.iter().position(|x| *x == n)
            });
        }
        set.warnings
    }
}

/// Whether an `-xt` pattern matches `name`.
fn excluded(flags: &ToolFlags, name: &str) -> bool {
    flags
        .exclude
        .as_deref()
        .is_some_and(|x| cli_entries(x).iter().any(|p| pattern_matches(p, name)))
}

/// What a run's tool choice allows the agents it delegates to (subagent
/// children): a child never gets a built-in tool its parent's user shut
/// out. Shut out are: everything under `--chat-only`; what `-xt` matches;
/// what a plain `--tools` list does not name or match; a `-name` entry;
/// with `-nt` or `-nbt`, every built-in not added by a `+name` entry; under
/// a pinned session selection, every built-in outside the pin (the flags
/// are ignored there, as for the parent). `defaultTools` in settings.json
/// is a default, not a limit: it shuts nothing out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolCeiling {
    flags: ToolFlags,
    pinned: Option<Pinned>,
}

impl ToolCeiling {
    /// Whether a delegated agent may have the built-in tool `name`.
    pub fn allows(&self, name: &str) -> bool {
        if let Some(p) = &self.pinned {
            return !p.chat_only && p.tools.iter().any(|t| t == name);
        }
        if self.flags.chat_only || excluded(&self.flags, name) {
            return false;
        }
        let Ok(arg) = self.flags.tools.as_deref().map(parse_tools).transpose() else {
            return false;
        };
        match arg {
            Some(ToolsArg::Plain(entries)) => entries.iter().any(|e| pattern_matches(e, name)),
            Some(ToolsArg::Delta(d)) => {
                if d.iter().any(|e| e.strip_prefix('-') == Some(name)) {
                    return false;
                }
                d.iter().any(|e| e.strip_prefix('+') == Some(name))
                    || !(self.flags.no_tools || self.flags.no_builtin_tools)
            }
            None => !(self.flags.no_tools || self.flags.no_builtin_tools),
        }
    }
}

impl ToolSet {
    /// The set as a `tool_set` record.
    pub fn record(&self) -> crate::format::resources::ToolSetRecord {
        crate::format::resources::ToolSetRecord {
            tools: self.names.clone(),
            chat_only: self.chat_only,
            source: serde_json::to_value(self.source)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
        }
    }
}

/// The built-in tool objects for `names` (names with no built-in are
/// skipped: extension and MCP tools come from their own hosts).
pub fn builtin_tools(names: &[String]) -> Vec<Arc<dyn Tool>> {
    names
        .iter()
        .filter_map(|n| super::builtin(n))
        .map(Arc::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(tools: Option<&str>, exclude: Option<&str>, nt: bool, nbt: bool) -> ToolFlags {
        ToolFlags {
            tools: tools.map(str::to_string),
            exclude: exclude.map(str::to_string),
            no_tools: nt,
            no_builtin_tools: nbt,
            chat_only: false,
        }
    }

    fn list(v: &[&str]) -> DefaultTools {
        DefaultTools::List(v.iter().map(|s| s.to_string()).collect())
    }

    fn run(f: &ToolFlags, s: &DefaultTools) -> Result<Vec<String>, String> {
        resolve(f, s, None, &builtin_available())
            .map(|t| t.names)
            .map_err(|e| e.to_string())
    }

    fn ok(v: &[&str]) -> Result<Vec<String>, String> {
        Ok(v.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn patterns() {
        assert!(pattern_matches("gr*", "grep"));
        assert!(pattern_matches("*e*", "read"));
        assert!(pattern_matches("*", "ls"));
        assert!(pattern_matches("r*d", "read"));
        assert!(!pattern_matches("r*d", "reads"));
        assert!(!pattern_matches("re?d", "read"));
        assert!(!pattern_matches("READ", "read"));
        assert!(pattern_matches("a*a", "aa"));
        assert!(!pattern_matches("a*a", "a"));
    }

    /// Cells observed with pi 1.6.0 (FINDINGS.md §5), tools pi has and this
    /// toolkit has not (powershell, codemode, tool_search) left out.
    #[test]
    fn flag_cells_as_pi() {
        let u = DefaultTools::Unset;
        let f = |t: Option<&str>, x: Option<&str>, nt, nbt| flags(t, x, nt, nbt);
        assert_eq!(
            run(&f(None, None, false, false), &u),
            ok(&["read", "bash", "edit", "write"])
        );
        assert_eq!(run(&f(Some("gr*"), None, false, false), &u), ok(&["grep"]));
        assert_eq!(
            run(&f(Some("write,*e*"), None, false, false), &u),
            ok(&["write", "read", "edit", "grep"])
        );
        assert_eq!(
            run(&f(Some("ls,read,ls"), None, false, false), &u),
            ok(&["ls", "read"])
        );
        // Exact names first, then the patterns' matches in registry order
        // wherever the patterns stood (pi 1.6.0).
        assert_eq!(
            run(&f(Some("gr*,read"), None, false, false), &u),
            ok(&["read", "grep"])
        );
        assert_eq!(
            run(&f(Some("f*,ls,gr*,read"), None, false, false), &u),
            ok(&["ls", "read", "grep", "find"])
        );
        assert_eq!(
            run(&f(Some("*"), None, false, false), &u),
            ok(&["read", "bash", "edit", "write", "grep", "find", "ls"])
        );
        assert_eq!(
            run(&f(Some(" read , grep "), None, false, false), &u),
            ok(&["read", "grep"])
        );
        assert_eq!(run(&f(Some(""), None, false, false), &u), ok(&[]));
        assert_eq!(run(&f(Some("nosuch"), None, false, false), &u), ok(&[]));
        assert_eq!(run(&f(Some("READ"), None, false, false), &u), ok(&[]));
        assert_eq!(
            run(&f(Some("+grep,-bash"), None, false, false), &u),
            ok(&["read", "edit", "write", "grep"])
        );
        assert_eq!(
            run(&f(Some("-bash"), None, false, false), &u),
            ok(&["read", "edit", "write"])
        );
        assert_eq!(
            run(&f(Some("-grep,+grep"), None, false, false), &u),
            ok(&["read", "bash", "edit", "write", "grep"])
        );
        assert_eq!(
            run(&f(Some("+grep,-grep"), None, false, false), &u),
            ok(&["read", "bash", "edit", "write"])
        );
        assert_eq!(
            run(&f(Some("read,-bash"), None, false, false), &u),
            Err("--tools: tool names cannot be mixed with +name or -name entries".into())
        );
        assert_eq!(
            run(&f(Some("+gr*,read"), None, false, false), &u),
            Err("--tools: tool names cannot be mixed with +name or -name entries".into())
        );
        assert_eq!(
            run(&f(Some("-x*"), None, false, false), &u),
            Err("--tools: +name and -name entries take exact tool names, not patterns: -x*".into())
        );
        assert_eq!(run(&f(None, None, true, false), &u), ok(&[]));
        assert_eq!(run(&f(None, None, false, true), &u), ok(&[]));
        assert_eq!(run(&f(Some("grep"), None, true, false), &u), ok(&["grep"]));
        assert_eq!(run(&f(Some("+grep"), None, true, false), &u), ok(&["grep"]));
        assert_eq!(run(&f(Some("+grep"), None, false, true), &u), ok(&["grep"]));
        assert_eq!(
            run(&f(None, Some("b*"), false, false), &u),
            ok(&["read", "edit", "write"])
        );
        assert_eq!(run(&f(None, Some("*"), false, false), &u), ok(&[]));
        assert_eq!(
            run(&f(None, Some(" e* , w* "), false, false), &u),
            ok(&["read", "bash"])
        );
        assert_eq!(
            run(&f(Some("grep"), Some("gr*"), false, false), &u),
            ok(&[])
        );
        assert_eq!(
            run(&f(Some("+grep"), Some("grep"), false, false), &u),
            ok(&["read", "bash", "edit", "write"])
        );
        assert_eq!(
            run(&f(None, Some("READ"), false, false), &u),
            ok(&["read", "bash", "edit", "write"])
        );
    }

    #[test]
    fn default_tools_setting_as_pi() {
        let n = flags(None, None, false, false);
        assert_eq!(
            run(&n, &list(&["+grep"])),
            ok(&["read", "bash", "edit", "write", "grep"])
        );
        assert_eq!(run(&n, &list(&["grep"])), ok(&["grep"]));
        assert_eq!(run(&n, &list(&[])), ok(&[]));
        assert_eq!(run(&n, &list(&["read", "+grep"])), ok(&["read", "grep"]));
        assert_eq!(run(&n, &list(&["+grep", "read"])), ok(&["read", "grep"]));
        assert_eq!(run(&n, &list(&["read", "-read", "+grep"])), ok(&["grep"]));
        assert_eq!(
            run(&n, &list(&["-bash", "+grep"])),
            ok(&["read", "edit", "write", "grep"])
        );
        assert_eq!(run(&n, &list(&["gr*"])), ok(&[]));
        assert_eq!(
            run(&n, &list(&["+gr*"])),
            ok(&["read", "bash", "edit", "write"])
        );
        assert_eq!(run(&n, &list(&[" +grep"])), ok(&[]));
        assert_eq!(run(&n, &DefaultTools::Invalid("a string")), ok(&[]));
        // Flags over the setting.
        let s = list(&["grep"]);
        assert_eq!(
            run(&flags(Some("+ls"), None, false, false), &s),
            ok(&["grep", "ls"])
        );
        assert_eq!(run(&flags(Some("ls"), None, false, false), &s), ok(&["ls"]));
        assert_eq!(run(&flags(None, None, true, false), &s), ok(&[]));
        assert_eq!(run(&flags(None, None, false, true), &s), ok(&[]));
        assert_eq!(run(&flags(None, Some("grep"), false, false), &s), ok(&[]));
        assert_eq!(
            run(&flags(Some("+ls"), None, false, false), &list(&[])),
            ok(&["ls"])
        );
    }

    #[test]
    fn kinds_plug_in() {
        let mut av = builtin_available();
        av.push(AvailableTool {
            name: "todo".into(),
            kind: ToolKind::Extension,
            active_by_default: true,
        });
        av.push(AvailableTool {
            name: "codemode".into(),
            kind: ToolKind::Extension,
            active_by_default: false,
        });
        av.push(AvailableTool {
            name: "mcp__gh__issues".into(),
            kind: ToolKind::Mcp,
            active_by_default: true,
        });
        let names = |f: &ToolFlags| resolve(f, &DefaultTools::Unset, None, &av).unwrap().names;
        assert_eq!(
            names(&flags(None, None, false, false)),
            ["read", "bash", "edit", "write", "todo", "mcp__gh__issues"]
        );
        // -nbt keeps extension (and MCP) tools, -nt drops everything.
        assert_eq!(
            names(&flags(None, None, false, true)),
            ["todo", "mcp__gh__issues"]
        );
        assert!(names(&flags(None, None, true, false)).is_empty());
        // A plain list is an allowlist for MCP tools too.
        assert_eq!(
            names(&flags(Some("read,c*"), None, false, false)),
            ["read", "codemode"]
        );
        assert_eq!(
            names(&flags(Some("read,mcp__x*"), None, false, false)),
            ["read"]
        );
        assert_eq!(
            names(&flags(Some("mcp__gh__*"), None, false, false)),
            ["mcp__gh__issues"]
        );
        // -xt applies to every kind.
        assert_eq!(
            names(&flags(None, Some("mcp__*,todo"), false, false)),
            ["read", "bash", "edit", "write"]
        );
        // An inactive extension tool can be added by name; a `+name` lands
        // before the later tools that are active by default (pi 1.6.0:
        // `-nbt -t +grep` gives grep first, `-t +steer_subagent` puts it
        // before `Agent`).
        assert_eq!(
            names(&flags(Some("+codemode"), None, false, true)),
            ["codemode", "todo", "mcp__gh__issues"]
        );
        // `-name` never removes a later tool that is active by default.
        assert_eq!(
            names(&flags(Some("-todo,-mcp__gh__issues"), None, false, false)),
            ["read", "bash", "edit", "write", "todo", "mcp__gh__issues"]
        );
        // An exact name keeps its place in a plain list; a pattern's later
        // tools follow the list.
        assert_eq!(
            names(&flags(Some("todo,read"), None, false, false)),
            ["todo", "read"]
        );
        assert_eq!(
            names(&flags(Some("*o*,read"), None, false, false)),
            ["read", "todo", "codemode"]
        );
    }

    fn ext(name: &str, active: bool) -> AvailableTool {
        AvailableTool {
            name: name.into(),
            kind: ToolKind::Extension,
            active_by_default: active,
        }
    }

    /// pi 1.6.0 with an extension registering `Agent`,
    /// `get_subagent_result` and `steer_subagent` (observed through the
    /// mock LLM; `tests/integration/tool_set.rs` replays these against pi).
    #[test]
    fn later_tools_as_pi_treats_an_extension_s_tools() {
        let sel = |t: Option<&str>, x: Option<&str>, nt: bool, nbt: bool| {
            let mut s = Selection::new(flags(t, x, nt, nbt), DefaultTools::Unset, None);
            s.add(builtin_available());
            s.add(["Agent", "get_subagent_result", "steer_subagent"].map(|n| ext(n, true)));
            s
        };
        let names = |s: &Selection| s.resolve().unwrap().names;
        let all = ["Agent", "get_subagent_result", "steer_subagent"];
        let cells: Vec<(Selection, Vec<&str>)> = vec![
            (sel(None, None, true, false), vec![]),
            (sel(None, None, false, true), all.to_vec()),
            (
                sel(None, Some("Agent"), false, false),
                vec![
                    "read",
                    "bash",
                    "edit",
                    "write",
                    "get_subagent_result",
                    "steer_subagent",
                ],
            ),
            (
                sel(None, Some("*agent*"), false, false),
                vec!["read", "bash", "edit", "write", "Agent"],
            ),
            (sel(Some("read"), None, false, false), vec!["read"]),
            (
                sel(Some("Agent,read"), None, false, false),
                vec!["Agent", "read"],
            ),
            (
                sel(Some("*_*,read"), None, false, false),
                vec!["read", "get_subagent_result", "steer_subagent"],
            ),
            (
                sel(Some("-Agent"), None, false, false),
                vec![
                    "read",
                    "bash",
                    "edit",
                    "write",
                    "Agent",
                    "get_subagent_result",
                    "steer_subagent",
                ],
            ),
            (
                sel(Some("+steer_subagent"), None, false, false),
                vec![
                    "read",
                    "bash",
                    "edit",
                    "write",
                    "steer_subagent",
                    "Agent",
                    "get_subagent_result",
                ],
            ),
            (sel(Some("+Agent"), None, true, false), vec!["Agent"]),
        ];
        for (s, want) in cells {
            assert_eq!(names(&s), want, "{:?}", s.flags);
            assert!(s.resolve().unwrap().warnings.is_empty(), "{:?}", s.flags);
            for n in all {
                assert_eq!(s.is_active(n), want.contains(&n), "{n} {:?}", s.flags);
            }
        }
        // Before the control tools are known their names are "not here";
        // once they are, nothing is said.
        let mut s = Selection::new(
            flags(Some("read,Agent"), None, false, false),
            DefaultTools::Unset,
            None,
        );
        s.add(builtin_available());
        assert!(s.resolve().unwrap().warnings[0].contains("no tool \"Agent\""));
        s.add([ext("Agent", true)]);
        assert!(s.resolve().unwrap().warnings.is_empty());
    }

    #[test]
    fn admits_is_pi_s_filter_for_tools_an_extension_activates() {
        let sel = |t: Option<&str>, x: Option<&str>, nt: bool, nbt: bool| {
            Selection::new(flags(t, x, nt, nbt), DefaultTools::Unset, None)
        };
        // pi 1.6.0 with setActiveTools(["read","bash","foo","bar"]) in
        // session_start: -xt foo drops foo, -t read keeps read, -nt drops
        // all, -nbt and -t -foo drop nothing.
        assert!(!sel(None, Some("foo"), false, false).admits("foo"));
        assert!(sel(None, Some("foo"), false, false).admits("bar"));
        assert!(sel(Some("read"), None, false, false).admits("read"));
        assert!(!sel(Some("read"), None, false, false).admits("foo"));
        assert!(!sel(None, None, true, false).admits("read"));
        assert!(sel(Some("+foo"), None, true, false).admits("foo"));
        assert!(sel(None, None, false, true).admits("read"));
        assert!(sel(Some("-foo"), None, false, false).admits("foo"));
        let chat = ToolFlags {
            chat_only: true,
            ..Default::default()
        };
        assert!(!Selection::new(chat, DefaultTools::Unset, None).admits("read"));
    }

    #[test]
    fn ceiling_shuts_out_what_the_user_excluded() {
        let c = |t: Option<&str>, x: Option<&str>, nt: bool, nbt: bool| {
            Selection::new(flags(t, x, nt, nbt), list(&["read"]), None).ceiling()
        };
        let allowed = |c: &ToolCeiling| -> Vec<&str> {
            crate::tools::BUILTIN_TOOLS
                .iter()
                .copied()
                .filter(|n| c.allows(n))
                .collect()
        };
        let all = crate::tools::BUILTIN_TOOLS.to_vec();
        // No flags: every built-in (defaultTools is not a limit).
        assert_eq!(allowed(&c(None, None, false, false)), all);
        assert_eq!(
            allowed(&c(None, Some("b*,w*"), false, false)),
            ["read", "edit", "grep", "find", "ls"]
        );
        assert_eq!(
            allowed(&c(Some("read,Agent"), None, false, false)),
            ["read"]
        );
        assert_eq!(
            allowed(&c(Some("*e*"), None, false, false)),
            ["read", "edit", "write", "grep"]
        );
        assert!(allowed(&c(None, None, false, true)).is_empty());
        assert!(allowed(&c(None, None, true, false)).is_empty());
        assert_eq!(allowed(&c(Some("+ls"), None, false, true)), ["ls"]);
        assert_eq!(
            allowed(&c(Some("-bash,+ls"), None, false, false)),
            ["read", "edit", "write", "grep", "find", "ls"]
        );
        let pin = Pinned {
            tools: vec!["read".into(), "ls".into()],
            chat_only: false,
            source: PinSource::Session,
        };
        let pinned = Selection::new(
            flags(None, Some("read"), false, false),
            DefaultTools::Unset,
            Some(pin),
        )
        .ceiling();
        assert_eq!(allowed(&pinned), ["read", "ls"]);
        assert!(allowed(&ToolCeiling {
            flags: ToolFlags {
                chat_only: true,
                ..Default::default()
            },
            pinned: None
        })
        .is_empty());
    }

    #[test]
    fn pins_keep_extension_tools_by_their_default() {
        let pin = Pinned {
            tools: vec!["read".into()],
            chat_only: false,
            source: PinSource::Session,
        };
        let mut s = Selection::new(
            flags(Some("bash"), None, false, false),
            DefaultTools::Unset,
            Some(pin.clone()),
        );
        s.add(builtin_available());
        s.add([
            AvailableTool {
                name: "mcp__x__y".into(),
                kind: ToolKind::Mcp,
                active_by_default: true,
            },
            ext("Agent", true),
            ext("codemode", false),
        ]);
        assert_eq!(s.resolve().unwrap().names, ["read", "Agent"]);
        let chat = Pinned {
            tools: Vec::new(),
            chat_only: true,
            ..pin
        };
        let mut s = Selection::new(ToolFlags::default(), DefaultTools::Unset, Some(chat));
        s.add([ext("Agent", true)]);
        assert!(s.resolve().unwrap().names.is_empty());
        assert!(!s.admits("Agent"));
    }

    #[test]
    fn pins_win_and_requests_persist() {
        let av = builtin_available();
        let pin = Pinned {
            tools: vec!["read".into(), "ls".into()],
            chat_only: false,
            source: PinSource::Session,
        };
        let t = resolve(
            &flags(Some("bash"), None, false, false),
            &DefaultTools::Unset,
            Some(&pin),
            &av,
        )
        .unwrap();
        assert_eq!(
            (t.names.clone(), t.source, t.persist.clone()),
            (
                vec!["read".to_string(), "ls".to_string()],
                ToolSource::Session,
                None
            )
        );
        assert!(
            t.warnings[0].contains("pins its tools (read, ls)"),
            "{:?}",
            t.warnings
        );
        // The same selection asked again: nothing to say.
        let t = resolve(
            &flags(Some("read,ls"), None, false, false),
            &DefaultTools::Unset,
            Some(&pin),
            &av,
        )
        .unwrap();
        assert!(t.warnings.is_empty());
        // A plain list pins its built-ins; -xt is applied first.
        let t = resolve(
            &flags(Some("r*,bash,ls"), Some("ls"), false, false),
            &DefaultTools::Unset,
            None,
            &av,
        )
        .unwrap();
        assert_eq!(
            t.persist,
            Some(vec!["bash".to_string(), "read".to_string()])
        );
        // Deltas, -nt and an empty plain list pin nothing.
        for f in [
            flags(Some("+grep"), None, false, false),
            flags(None, None, true, false),
            flags(Some(""), None, false, false),
        ] {
            let t = resolve(&f, &DefaultTools::Unset, None, &av).unwrap();
            assert_eq!((t.persist, t.chat_only), (None, false), "{f:?}");
        }
        let chat = ToolFlags {
            chat_only: true,
            ..Default::default()
        };
        let t = resolve(&chat, &list(&["grep"]), None, &av).unwrap();
        assert_eq!(
            (t.names.len(), t.chat_only, t.persist),
            (0, true, Some(Vec::new()))
        );
    }

    #[test]
    fn unknown_names_are_reported() {
        let t = resolve(
            &flags(Some("read,powershell"), None, false, false),
            &DefaultTools::Unset,
            None,
            &builtin_available(),
        )
        .unwrap();
        assert_eq!(t.names, ["read"]);
        assert!(
            t.warnings[0].starts_with("--tools: no tool \"powershell\" here"),
            "{:?}",
            t.warnings
        );
        let t = resolve(
            &flags(None, None, false, false),
            &list(&["+codemode"]),
            None,
            &builtin_available(),
        )
        .unwrap();
        assert!(
            t.warnings[0].contains("settings.json defaultTools: no tool \"codemode\""),
            "{:?}",
            t.warnings
        );
    }
}
