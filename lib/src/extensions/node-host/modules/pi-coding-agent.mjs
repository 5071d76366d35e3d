// The host's `@earendil-works/pi-coding-agent` (and `@mariozechner/pi-coding-agent`, any
// subpath): the helpers pi's extensions import — `defineTool`, the event type guards, paths and
// constants, pi's truncation utilities (same numbers and `details.truncation` shape as the
// toolkit's tools), frontmatter parsing, the per-file mutation queue, message conversion — and
// inert stand-ins for TUI pieces (themes, borders, editors). What needs pi's own runtime
// (sessions, settings and resource managers, built-in tool factories, an agent session) throws
// `pi-toolkit host: <name> is not available` when used.
import { homedir } from "node:os";
import { extname, join, resolve as resolvePath } from "node:path";
import { Type } from "./typebox.mjs";
import { inertClass, inertObject, unavailableClass, unavailableFn } from "./inert.mjs";

const M = "@earendil-works/pi-coding-agent";
const host = () => globalThis.__piToolkitHost ?? {};

export const VERSION = "1.6.0";
export const CONFIG_DIR_NAME = ".pi";
export const APP_NAME = "pi";
export const DEFAULT_MAX_LINES = 2000;
export const DEFAULT_MAX_BYTES = 50 * 1024;
export { Type };

/** The agent folder: what the toolkit said in `hello`, else `PI_CODING_AGENT_DIR`, else `~/.pi/agent`. */
export function getAgentDir() {
	if (host().agentDir) return host().agentDir;
	const env = process.env.PI_CODING_AGENT_DIR;
	if (env) return env === "~" ? homedir() : env.startsWith("~/") ? join(homedir(), env.slice(2)) : resolvePath(env);
	return join(homedir(), CONFIG_DIR_NAME, "agent");
}
export const getSessionsDir = () => join(getAgentDir(), "sessions");
export const getSettingsPath = () => join(getAgentDir(), "settings.json");

export const defineTool = (def) => def;
export const isToolCallEventType = (toolName, event) => !!event && event.toolName === toolName;
export const isToolResultEventType = (toolName, event) => !!event && event.toolName === toolName;
export const isBashToolResult = (event) => !!event && event.toolName === "bash";
export const isReadToolResult = (event) => !!event && event.toolName === "read";
export const isEditToolResult = (event) => !!event && event.toolName === "edit";
export const isWriteToolResult = (event) => !!event && event.toolName === "write";
export const isGrepToolResult = (event) => !!event && event.toolName === "grep";
export const isFindToolResult = (event) => !!event && event.toolName === "find";
export const isLsToolResult = (event) => !!event && event.toolName === "ls";

// --- truncation (the numbers and shapes of the toolkit's lib/src/tools/truncate.rs)
const utf8Len = (s) => Buffer.byteLength(s, "utf8");
function splitLines(text) {
	const lines = text.split("\n");
	if (lines.length > 1 && lines[lines.length - 1] === "") lines.pop();
	return lines;
}
function untruncated(text, lines, maxLines, maxBytes) {
	return {
		content: text, truncated: false, truncatedBy: null, totalLines: lines, totalBytes: utf8Len(text),
		outputLines: lines, outputBytes: utf8Len(text), lastLinePartial: false, firstLineExceedsLimit: false, maxLines, maxBytes,
	};
}
/** Keeps whole lines from the start while both limits hold. */
export function truncateHead(text, options = {}) {
	text = String(text ?? "");
	const maxLines = options.maxLines ?? DEFAULT_MAX_LINES;
	const maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES;
	const lines = splitLines(text);
	const totalBytes = utf8Len(text);
	if (lines.length <= maxLines && totalBytes <= maxBytes) return untruncated(text, lines.length, maxLines, maxBytes);
	const t = { ...untruncated("", lines.length, maxLines, maxBytes), totalBytes, truncated: true };
	if (utf8Len(lines[0] ?? "") > maxBytes) return { ...t, truncatedBy: "bytes", firstLineExceedsLimit: true, outputLines: 0, outputBytes: 0 };
	let bytes = 0, count = 0, by = "lines";
	for (let i = 0; i < lines.length; i++) {
		if (i >= maxLines) { by = "lines"; break; }
		const add = utf8Len(lines[i]) + (i > 0 ? 1 : 0);
		if (bytes + add > maxBytes) { by = "bytes"; break; }
		bytes += add;
		count++;
	}
	return { ...t, content: lines.slice(0, count).join("\n"), truncatedBy: by, outputLines: count, outputBytes: bytes };
}
/** Keeps whole lines from the end while both limits hold (the end of one long line when it alone is over). */
export function truncateTail(text, options = {}) {
	text = String(text ?? "");
	const maxLines = options.maxLines ?? DEFAULT_MAX_LINES;
	const maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES;
	const lines = splitLines(text);
	const totalBytes = utf8Len(text);
	if (lines.length <= maxLines && totalBytes <= maxBytes) return untruncated(text, lines.length, maxLines, maxBytes);
	const t = { ...untruncated("", lines.length, maxLines, maxBytes), totalBytes, truncated: true };
	let bytes = 0, count = 0, by = "lines";
	for (let i = 0; i < lines.length; i++) {
		const line = lines[lines.length - 1 - i];
		if (i >= maxLines) { by = "lines"; break; }
		const add = utf8Len(line) + (i > 0 ? 1 : 0);
		if (bytes + add > maxBytes) {
			by = "bytes";
			if (i === 0) {
				const buf = Buffer.from(line, "utf8");
				let start = buf.length - maxBytes;
				while (start < buf.length && (buf[start] & 0xc0) === 0x80) start++;
				const part = buf.subarray(start).toString("utf8");
				return { ...t, content: part, truncatedBy: by, outputLines: 1, outputBytes: utf8Len(part), lastLinePartial: true };
			}
			break;
		}
		bytes += add;
		count++;
	}
	return { ...t, content: lines.slice(lines.length - count).join("\n"), truncatedBy: by, outputLines: count, outputBytes: bytes };
}
/** One line cut to `maxChars` characters (default 500) plus `... [truncated]`. */
export function truncateLine(line, maxChars = 500) {
	const chars = [...String(line ?? "")];
	if (chars.length <= maxChars) return { text: chars.join(""), wasTruncated: false };
	return { text: `${chars.slice(0, maxChars).join("")}... [truncated]`, wasTruncated: true };
}
/** `512B`, `50.0KB`, `1.5MB`. */
export function formatSize(bytes) {
	if (bytes < 1024) return `${bytes}B`;
	if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)}KB`;
	return `${(bytes / (1024 * 1024)).toFixed(1)}MB`;
}

// --- frontmatter: a `---` block of simple YAML (scalars, inline and dash lists)
function scalar(v) {
	v = v.trim();
	if (v === "") return "";
	if ((v.startsWith('"') && v.endsWith('"')) || (v.startsWith("'") && v.endsWith("'"))) {
		if (v.startsWith('"')) { try { return JSON.parse(v); } catch {} }
		return v.slice(1, -1);
	}
	if (v === "true") return true;
	if (v === "false") return false;
	if (v === "null" || v === "~") return null;
	if (/^-?\d+(\.\d+)?$/.test(v)) return Number(v);
	if (v.startsWith("[") && v.endsWith("]")) return v.slice(1, -1).split(",").map((x) => scalar(x)).filter((x) => x !== "");
	return v;
}
/** `{frontmatter, body}` of a markdown text with an optional leading `---` block. */
export function parseFrontmatter(content) {
	const text = String(content ?? "").replace(/^\uFEFF/, "");
	const m = /^---\r?\n([\s\S]*?)\r?\n---[ \t]*(?:\r?\n|$)/.exec(text);
	if (!m) return { frontmatter: {}, body: text };
	const fm = {};
	let listKey = null;
	for (const raw of m[1].split(/\r?\n/)) {
		if (!raw.trim() || raw.trim().startsWith("#")) continue;
		const item = /^\s+-\s+(.*)$/.exec(raw) ?? (listKey && /^-\s+(.*)$/.exec(raw));
		if (item && listKey) {
			if (!Array.isArray(fm[listKey])) fm[listKey] = [];
			fm[listKey].push(scalar(item[1]));
			continue;
		}
		const kv = /^([\w.-]+)\s*:\s*(.*)$/.exec(raw);
		if (kv) {
			fm[kv[1]] = scalar(kv[2]);
			listKey = kv[2].trim() === "" ? kv[1] : null;
		}
	}
	return { frontmatter: fm, body: text.slice(m[0].length) };
}
export const stripFrontmatter = (content) => parseFrontmatter(content).body;

// --- one queue per file path, so concurrent edits of one file run one after another
const queues = new Map();
export function withFileMutationQueue(path, fn) {
	const key = resolvePath(String(path));
	const prev = queues.get(key) ?? Promise.resolve();
	const run = prev.then(() => fn(), () => fn());
	const tail = run.then(() => {}, () => {});
	queues.set(key, tail);
	tail.then(() => { if (queues.get(key) === tail) queues.delete(key); });
	return run;
}

const LANGS = {
	".ts": "typescript", ".tsx": "tsx", ".mts": "typescript", ".cts": "typescript", ".js": "javascript", ".jsx": "jsx",
	".mjs": "javascript", ".cjs": "javascript", ".json": "json", ".md": "markdown", ".py": "python", ".rs": "rust",
	".go": "go", ".sh": "bash", ".bash": "bash", ".zsh": "bash", ".yml": "yaml", ".yaml": "yaml", ".toml": "toml",
	".html": "html", ".css": "css", ".c": "c", ".h": "c", ".cpp": "cpp", ".hpp": "cpp", ".java": "java", ".rb": "ruby",
	".php": "php", ".sql": "sql", ".swift": "swift", ".kt": "kotlin",
};
export const getLanguageFromPath = (path) => LANGS[extname(String(path ?? "")).toLowerCase()];
export const highlightCode = (code) => String(code ?? "").split("\n");
export const keyHint = (_action, description) => description ?? "";
export const keyText = (action) => String(action ?? "");
export const rawKeyHint = (key, description) => `${key} ${description ?? ""}`.trim();
export const getMarkdownTheme = () => inertObject();
export const getSettingsListTheme = () => inertObject();
export const getSelectListTheme = () => inertObject();
export const initTheme = () => {};
export const theme = inertObject();

// --- messages: the toolkit's agent messages to the LLM's view, and a plain-text transcript
function textOf(content) {
	if (typeof content === "string") return content;
	if (!Array.isArray(content)) return "";
	return content.filter((b) => b && b.type === "text").map((b) => b.text).join("");
}
export function convertToLlm(messages) {
	const out = [];
	for (const m of messages ?? []) {
		if (!m) continue;
		if (m.role === "user" || m.role === "assistant" || m.role === "toolResult") out.push(m);
		else if (m.role === "custom") out.push({ role: "user", content: typeof m.content === "string" ? [{ type: "text", text: m.content }] : m.content, timestamp: m.timestamp });
		else if (m.role === "bashExecution" && !m.excludeFromContext) out.push({ role: "user", content: [{ type: "text", text: `Ran \`${m.command}\`\n\`\`\`\n${m.output ?? ""}\n\`\`\`` }], timestamp: m.timestamp });
		else if (m.role === "compactionSummary" || m.role === "branchSummary") out.push({ role: "user", content: [{ type: "text", text: m.summary ?? "" }], timestamp: m.timestamp });
	}
	return out;
}
export function serializeConversation(messages) {
	const parts = [];
	for (const m of messages ?? []) {
		if (!m) continue;
		if (m.role === "user") parts.push(`[User]: ${textOf(m.content)}`);
		else if (m.role === "assistant") {
			const text = textOf(m.content);
			if (text) parts.push(`[Assistant]: ${text}`);
			for (const b of Array.isArray(m.content) ? m.content : []) if (b && b.type === "toolCall") parts.push(`[Assistant tool call]: ${b.name}(${JSON.stringify(b.arguments ?? {})})`);
		} else if (m.role === "toolResult") parts.push(`[Tool result]: ${textOf(m.content)}`);
	}
	return parts.join("\n\n");
}

// --- TUI pieces: inert
export const DynamicBorder = inertClass("DynamicBorder");
export const BorderedLoader = inertClass("BorderedLoader");
export const CustomEditor = inertClass("CustomEditor");
export const ToolExecutionComponent = inertClass("ToolExecutionComponent");

// --- pi's own runtime: not in the toolkit's host
export const SessionManager = unavailableClass(M, "SessionManager");
export const SettingsManager = unavailableClass(M, "SettingsManager");
export const DefaultResourceLoader = unavailableClass(M, "DefaultResourceLoader");
export const AuthStorage = unavailableClass(M, "AuthStorage");
export const ModelRegistry = unavailableClass(M, "ModelRegistry");
export const AgentSession = unavailableClass(M, "AgentSession");
export const createAgentSession = unavailableFn(M, "createAgentSession");
export const createAgentSessionRuntime = unavailableFn(M, "createAgentSessionRuntime");
export const createLocalBashOperations = unavailableFn(M, "createLocalBashOperations");
export const copyToClipboard = unavailableFn(M, "copyToClipboard");
export const resizeImage = unavailableFn(M, "resizeImage");
export const formatReadLineRange = (start, end) => (end !== undefined && end !== start ? `${start}-${end}` : `${start}`);
// The built-in tool factories give descriptors with pi's tool names (extensions read the names,
// e.g. to offer them to a sub-agent); running one from inside the host is not available — the
// toolkit runs the built-in tools itself.
const BUILTIN = {
	read: ["Read", "Read a file", { path: Type.String(), offset: Type.Optional(Type.Number()), limit: Type.Optional(Type.Number()) }],
	bash: ["Bash", "Run a shell command", { command: Type.String(), timeout: Type.Optional(Type.Number()) }],
	edit: ["Edit", "Edit a file by replacing exact text", { path: Type.String(), edits: Type.Array(Type.Object({ oldText: Type.String(), newText: Type.String() })) }],
	write: ["Write", "Write a file", { path: Type.String(), content: Type.String() }],
	grep: ["Grep", "Search file contents", { pattern: Type.String(), path: Type.Optional(Type.String()) }],
	find: ["Find", "Find files by glob", { pattern: Type.String(), path: Type.Optional(Type.String()) }],
	ls: ["Ls", "List a directory", { path: Type.Optional(Type.String()) }],
};
function builtinTool(name) {
	const [label, description, props] = BUILTIN[name];
	return {
		name, label, description, parameters: Type.Object(props),
		execute: unavailableFn(M, `the built-in ${name} tool`),
	};
}
const cap = (n) => n[0].toUpperCase() + n.slice(1);
const factories = {};
for (const name of Object.keys(BUILTIN)) {
	factories[`create${cap(name)}Tool`] = () => builtinTool(name);
	factories[`create${cap(name)}ToolDefinition`] = () => builtinTool(name);
}
export const { createReadTool, createReadToolDefinition, createBashTool, createBashToolDefinition, createEditTool, createEditToolDefinition,
	createWriteTool, createWriteToolDefinition, createGrepTool, createGrepToolDefinition, createFindTool, createFindToolDefinition,
	createLsTool, createLsToolDefinition } = factories;
export const createCodingTools = () => ["read", "bash", "edit", "write"].map(builtinTool);
export const createReadOnlyTools = () => ["read", "grep", "find", "ls"].map(builtinTool);
export const createAllTools = () => Object.keys(BUILTIN).map(builtinTool);

export default { VERSION, CONFIG_DIR_NAME, getAgentDir, defineTool, isToolCallEventType, truncateHead, truncateTail, formatSize };
