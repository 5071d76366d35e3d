// The toolkit's Node host: runs pi 1.6.0's TypeScript/JavaScript extensions unchanged, all of a
// run's in one Node process (as pi runs them in one runtime), and speaks the toolkit's extension
// protocol pi-ext/1 with pi-run over stdin (records from the toolkit) and the records pipe, fd 3
// (records to it; stdout when pi-run offers no pipe), one JSON object per line. Whatever an
// extension prints (console.*, process.stdout.write) goes to stderr, which pi-run forwards as
// diagnostics.
//
// Order: `hello` → load every path in `load`, in order (default-export factory `(pi) => …`,
// awaited; a `loading` record before each; a failing one is reported in `errors` with pi's
// wording and the rest go on) → `register` → `configure` (flag values) → `event` / `execute` / `command` / `reload` requests,
// each answered once by `result`, with `update`s for tool progress; `cancel` aborts a request's
// signal; the extension's own `call`s are answered by `return`; `bye` (or stdin's end) exits.
// Run as `node host.mjs` (no flags needed); see README.md beside this file.
import * as nodeModule from "node:module";
import { dirname, join, resolve as resolvePath } from "node:path";
import { pathToFileURL } from "node:url";
import { Console } from "node:console";
import { AsyncLocalStorage } from "node:async_hooks";
// Builtins through require: an ESM import of node:fs builds its facade, which loads fs/promises,
// the fs streams and watchers (start-up time the host does not need).
const { existsSync, readFileSync, statSync, fstatSync, writeSync } = nodeModule.createRequire(import.meta.url)("node:fs");
import { createExtensionAPI, createContext } from "./api.mjs";
import { runHandlers, thrownMessage } from "./compose.mjs";

export const PROTOCOL = 1;

// ---- the protocol's records go to the records pipe pi-run offers (PI_EXT_RECORDS_FD, fd 3), which
// the processes extensions start do not inherit (Node's children get only the stdio they are
// given), so nothing a child prints can pass for an answer; without one, to stdout. Either way
// the extensions' own output goes to stderr.
const writeStdout = process.stdout.write.bind(process.stdout);
const RECORDS_FD = (() => {
	const fd = Number(process.env.PI_EXT_RECORDS_FD);
	delete process.env.PI_EXT_RECORDS_FD;
	if (!Number.isInteger(fd) || fd < 3) return null;
	try {
		fstatSync(fd);
		return fd;
	} catch {
		return null;
	}
})();
function writeRecord(text) {
	if (RECORDS_FD === null) return writeStdout(text);
	const buf = Buffer.from(text);
	try {
		for (let off = 0; off < buf.length; ) off += writeSync(RECORDS_FD, buf, off);
	} catch {
		// pi-run is gone: nobody is left to serve.
		realExit(0);
	}
}
process.stdout.write = (chunk, encoding, cb) => process.stderr.write(chunk, encoding, cb);
globalThis.console = new Console({ stdout: process.stderr, stderr: process.stderr });

// ---- one extension cannot take the others down
// Which extension's code is running (its load slot, see loadAll), also in the timers and promises
// it started: a stray error or a process.exit is charged to it, not to the host.
const owner = new AsyncLocalStorage();
let loadingNow = null; // the slot being loaded, if any
const realExit = process.exit.bind(process);
process.exit = function exit(code) {
	const c = code ?? process.exitCode ?? 0;
	const slot = owner.getStore() ?? loadingNow;
	if (slot && !slot.settled) slot.fail(new LoadError(`Failed to load extension: it called process.exit(${c}) while loading`));
	throw new Error(`process.exit(${c}) is not available to extensions: it would end every extension of the run`);
};
function strayError(e, kind) {
	const slot = owner.getStore() ?? loadingNow;
	const msg = `${kind}: ${thrownMessage(e)}`;
	if (slot && !slot.settled) return slot.fail(new LoadError(`Failed to load extension: ${msg}`));
	if (slot && !registered) {
		// Loaded, but its leftovers failed before the registrations went out: it fails to load.
		slot.late ??= `Failed to load extension: ${msg}`;
		return;
	}
	if (slot && exts[slot.index] === slot.ext) return send({ type: "extension_error", ext: slot.index, event: kind, error: thrownMessage(e) });
	process.stderr.write(`pi-toolkit host: ${kind}: ${e && e.stack ? e.stack : e}\n`);
}
process.on("uncaughtException", (e) => strayError(e, "uncaught exception"));
process.on("unhandledRejection", (e) => strayError(e, "unhandled rejection"));
// The event loop ran dry while an extension was loading: nothing is left that could ever settle
// its factory (pi's process would just exit). During loading stdin does not keep the loop alive.
// The same for event handlers: while only event handlers run and none waits for an answer from
// pi-run, stdin does not keep the loop alive either, so a handler that waits for something that
// can never happen is answered as failed at once instead of after the event timeout (pi's process
// would just exit).
process.on("beforeExit", () => {
	if (loadingNow && !loadingNow.settled) {
		loadingNow.fail(new LoadError("Failed to load extension: its factory never finished (it waits for something that can never happen)"));
		return;
	}
	if (!runningEvents.size || pendingCalls.size) return;
	for (const id of runningEvents) {
		running.delete(id);
		answer(id, { error: "its handler never finished (it waits for something that can never happen)" });
	}
	runningEvents.clear();
	stdinKeepsAlive();
});
// Node's ExperimentalWarning (type stripping) is not the user's concern; other warnings are shown.
process.removeAllListeners("warning");
process.on("warning", (w) => {
	if (w && w.name !== "ExperimentalWarning") process.stderr.write(`${w.name}: ${w.message}\n`);
});

function send(record) {
	let line;
	try {
		line = JSON.stringify(record);
	} catch (e) {
		if (record.type === "result" || record.type === "update") {
			line = JSON.stringify({ type: "result", id: record.id, error: `result is not JSON: ${thrownMessage(e)}` });
		} else return;
	}
	writeRecord(`${line}\n`);
}

// ---- module hooks: TypeScript, jiti's lenient specifiers, pi's packages from ./modules
const HOST_MODULES = ["typebox", "pi-ai", "pi-tui", "pi-coding-agent", "pi-agent-core"];
const exportNames = {};
for (const id of HOST_MODULES) exportNames[id] = Object.keys(await import(`./modules/${id}.mjs`));
const tsSupported = typeof nodeModule.registerHooks === "function" && typeof nodeModule.stripTypeScriptTypes === "function";
const hooks = await import("./hooks.mjs");
if (typeof nodeModule.registerHooks === "function") {
	hooks.configure({ exportNames, tsSupported });
	nodeModule.registerHooks({ resolve: hooks.resolveSync, load: hooks.loadSync });
} else if (typeof nodeModule.register === "function") {
	nodeModule.register("./hooks.mjs", import.meta.url, { data: { exportNames, tsSupported: false } });
}

// ---- runtime state
const exts = []; // by ext index
let hello = null;
let nextCall = 1;
const pendingCalls = new Map(); // "c<n>" -> {resolve, reject}
const running = new Map(); // request id -> AbortController
const runningEvents = new Set(); // ids of the running event requests (see beforeExit)
let loadingAll = false;
/** stdin keeps the process alive unless only event handlers run and none waits for pi-run. */
function stdinKeepsAlive() {
	if (loadingAll) return;
	if (runningEvents.size && runningEvents.size === running.size && !pendingCalls.size) process.stdin.unref?.();
	else process.stdin.ref?.();
}
let registered = false;
const announceQueue = new Map(); // ext index -> {tools:Set, commands:Set, events:Set}
const busListeners = new Map(); // channel -> [{ext, fn}]
const USES = ["sessionManager", "getSessionName", "getActiveTools", "getAllTools", "getCommands", "getContextUsage", "getSystemPrompt", "hasPendingMessages", "modelRegistry"];
const uses = new Set();

const rt = {
	get hello() {
		return hello ?? {};
	},
	snapshot: {},
	cache: {},
	cached(key, fallback) {
		const v = Object.prototype.hasOwnProperty.call(rt.cache, key) ? rt.cache[key] : undefined;
		return v === undefined || v === null ? fallback : v;
	},
	sessionName() {
		if (Object.prototype.hasOwnProperty.call(rt.cache, "sessionName")) return rt.cache.sessionName;
		let name;
		for (const e of rt.cached("session.getEntries", [])) if (e && e.type === "session_info") name = e.name ?? undefined;
		return name;
	},
	call(ext, method, params, _opts) {
		const id = `c${nextCall++}`;
		return new Promise((resolve, reject) => {
			pendingCalls.set(id, { resolve, reject });
			stdinKeepsAlive();
			send({ type: "call", id, ext: ext.index, method, params: params ?? {} });
		});
	},
	/** An action whose failure pi reports as an extension error (the promise still resolves). */
	fire(ext, method, params) {
		return rt.call(ext, method, params).then(
			() => undefined,
			(e) => send({ type: "extension_error", ext: ext.index, event: method, error: thrownMessage(e) }),
		);
	},
	announce(ext, what) {
		if (ext.loading || !registered) return;
		const q = announceQueue.get(ext.index) ?? { tools: new Set(), commands: new Set(), events: new Set() };
		for (const k of ["tools", "commands", "events"]) for (const v of what[k] ?? []) q[k].add(v);
		if (!announceQueue.has(ext.index)) {
			announceQueue.set(ext.index, q);
			queueMicrotask(() => flushAnnounce(ext.index));
		}
	},
	events(ext) {
		return {
			on(channel, fn) {
				const list = busListeners.get(channel) ?? [];
				const entry = { ext, fn };
				list.push(entry);
				busListeners.set(channel, list);
				return () => {
					const l = busListeners.get(channel) ?? [];
					const i = l.indexOf(entry);
					if (i >= 0) l.splice(i, 1);
				};
			},
			emit(channel, data) {
				for (const { ext: owner, fn } of [...(busListeners.get(channel) ?? [])]) {
					const report = (e) => send({ type: "extension_error", ext: owner.index, event: `events:${channel}`, error: thrownMessage(e) });
					try {
						const r = fn(data);
						if (r && typeof r.then === "function") r.then(undefined, report);
					} catch (e) {
						report(e);
					}
				}
			},
		};
	},
};

function flushAnnounce(index) {
	const q = announceQueue.get(index);
	announceQueue.delete(index);
	const ext = exts[index];
	if (!q || !ext) return;
	const rec = { type: "register_more", ext: index };
	rec.tools = [];
	for (const n of [...q.tools].filter((n) => ext.tools.has(n))) {
		try {
			rec.tools.push(toolSpec(ext.tools.get(n)));
		} catch (e) {
			send({ type: "extension_error", ext: index, event: "registerTool", error: `Tool "${n}": parameters are not JSON: ${thrownMessage(e)}` });
		}
	}
	rec.commands = [...q.commands].filter((n) => ext.commands.has(n)).map((n) => commandSpec(n, ext.commands.get(n)));
	rec.events = [...q.events].filter((e) => !ext.announcedEvents.has(e));
	for (const e of rec.events) ext.announcedEvents.add(e);
	if (rec.tools.length || rec.commands.length || rec.events.length) send(rec);
}

const plain = (v) => (v === undefined ? undefined : JSON.parse(JSON.stringify(v)));
function toolSpec(def) {
	const spec = { name: def.name };
	if (def.label !== undefined) spec.label = String(def.label);
	spec.description = typeof def.description === "string" ? def.description : "";
	spec.parameters = plain(def.parameters ?? { type: "object", properties: {} });
	if (def.promptSnippet !== undefined) spec.promptSnippet = def.promptSnippet;
	if (Array.isArray(def.promptGuidelines)) spec.promptGuidelines = [...def.promptGuidelines];
	if (def.defaultActive !== undefined) spec.defaultActive = def.defaultActive;
	if (def.executionMode !== undefined) spec.executionMode = def.executionMode;
	for (const k of ["exposure", "namespace", "annotations", "reachesTools", "outputSchema"]) if (def[k] !== undefined) spec[k] = plain(def[k]);
	return spec;
}
function commandSpec(name, options) {
	const spec = { name };
	if (typeof options.description === "string") spec.description = options.description;
	return spec;
}
function registration(ext) {
	const events = [...ext.handlers.keys()].filter((e) => ext.handlers.get(e).length);
	for (const e of events) ext.announcedEvents.add(e);
	return {
		ext: ext.index,
		path: ext.path,
		tools: [...ext.tools.values()].map(toolSpec),
		commands: [...ext.commands.entries()].map(([n, o]) => commandSpec(n, o)),
		flags: [...ext.flags.entries()].map(([name, f]) => {
			const spec = { name, type: f.type };
			if (f.default !== undefined) spec.default = f.default;
			if (typeof f.description === "string") spec.description = f.description;
			return spec;
		}),
		events,
	};
}

// ---- loading
class LoadError extends Error {}

/** The files one `load` path stands for: a file, or a folder's manifest entries / index. */
function entryFiles(path) {
	if (!existsSync(path)) throw new LoadError(`Extension path does not exist: ${path}`);
	if (!statSync(path).isDirectory()) return [path];
	const pj = join(path, "package.json");
	if (existsSync(pj)) {
		try {
			const list = JSON.parse(readFileSync(pj, "utf8"))?.pi?.extensions;
			if (Array.isArray(list)) {
				const files = list.filter((p) => typeof p === "string").map((p) => resolvePath(path, p)).filter((p) => existsSync(p));
				if (files.length) return files;
			}
		} catch {}
	}
	for (const n of ["index.ts", "index.js"]) if (existsSync(join(path, n))) return [join(path, n)];
	throw new LoadError(`Extension does not export a valid factory function: ${path}`);
}

function scanUses(file) {
	try {
		const src = readFileSync(file, "utf8");
		for (const u of USES) if (src.includes(u)) uses.add(u);
	} catch {}
}

/** How long one extension may take to import and run its factory (hello `loadTimeoutMs`). */
const DEFAULT_LOAD_TIMEOUT_MS = 8000;

async function loadOne(index, entry) {
	const path = typeof entry === "string" ? entry : entry.path;
	const ext = {
		index, path, source: entry.source, scope: entry.scope, loading: true,
		tools: new Map(), commands: new Map(), flags: new Map(), shortcuts: new Map(), handlers: new Map(),
		flagValues: {}, announcedEvents: new Set(),
	};
	const files = entryFiles(path);
	const pi = createExtensionAPI(ext, rt);
	for (const file of files) {
		if (/\.(c|m)?tsx?$/.test(file) && !tsSupported) {
			throw new LoadError(
				`Failed to load extension: TypeScript extensions need Node >= 22.18 (this is Node ${process.version}); set PI_NODE to a newer node`,
			);
		}
		scanUses(file);
		let mod;
		try {
			mod = await import(pathToFileURL(file).href);
		} catch (e) {
			throw new LoadError(`Failed to load extension: ${thrownMessage(e)}`);
		}
		let factory = mod.default;
		if (factory && typeof factory === "object" && typeof factory.default === "function") factory = factory.default;
		if (typeof factory !== "function") throw new LoadError(`Extension does not export a valid factory function: ${file}`);
		try {
			await factory(pi);
		} catch (e) {
			throw new LoadError(`Failed to load extension: ${thrownMessage(e)}`);
		}
	}
	for (const u of hooks.uses ?? []) uses.add(u);
	ext.loading = false;
	return ext;
}

/**
 * Loads one extension in its own slot: `owner` charges whatever its code does (timers included) to
 * the slot, and the slot settles once: loaded, failed (a throw, a stray error, process.exit, a
 * factory that can never finish), or out of time. The time limit does not keep the process alive.
 */
function loadInSlot(index, entry, ms) {
	const path = typeof entry === "string" ? entry : entry?.path;
	const slot = { index, path, settled: false, fail: null, late: null, ext: null };
	const done = new Promise((resolve, reject) => {
		const timer = setTimeout(() => slot.fail(new LoadError(`Failed to load extension: did not finish loading within ${ms / 1000} s`)), ms);
		timer.unref();
		const settle = (f) => (v) => {
			if (slot.settled) return;
			slot.settled = true;
			clearTimeout(timer);
			f(v);
		};
		slot.fail = settle(reject);
		owner.run(slot, () => loadOne(index, entry)).then(settle(resolve), slot.fail);
	});
	return { slot, done };
}

/** Loads every `load` path in order (each in its own slot): the registrations and errors. */
async function loadAll(rec) {
	const errors = [];
	const load = Array.isArray(rec.load) ? rec.load : [];
	const ms = Number.isFinite(rec.loadTimeoutMs) && rec.loadTimeoutMs > 0 ? rec.loadTimeoutMs : DEFAULT_LOAD_TIMEOUT_MS;
	const slots = [];
	// While loading, only the extensions' own work keeps the process alive (see beforeExit).
	loadingAll = true;
	process.stdin.unref?.();
	try {
		for (let i = 0; i < load.length; i++) {
			const path = typeof load[i] === "string" ? load[i] : load[i]?.path;
			send({ type: "loading", ext: i, path });
			const { slot, done } = loadInSlot(i, load[i], ms);
			slots.push(slot);
			loadingNow = slot;
			try {
				const ext = await done;
				try {
					ext.registration = registration(ext);
				} catch (e) {
					throw new LoadError(`Failed to load extension: a registration is not JSON: ${thrownMessage(e)}`);
				}
				slot.ext = ext;
				ext.slot = slot;
				exts[i] = ext;
			} catch (e) {
				errors.push({ path, message: e instanceof LoadError ? e.message : `Failed to load extension: ${thrownMessage(e)}` });
			} finally {
				loadingNow = null;
			}
		}
		// A rejection nobody handled is reported once the current task ends: let it, so a factory's
		// stray rejection still counts against its load.
		await new Promise((resolve) => setImmediate(resolve));
	} finally {
		loadingAll = false;
		stdinKeepsAlive();
	}
	for (const slot of slots) {
		if (slot.late && exts[slot.index]) {
			delete exts[slot.index];
			errors.push({ path: slot.path, message: slot.late });
		}
	}
	return { extensions: exts.filter(Boolean).map((e) => e.registration), errors };
}

async function onHello(rec) {
	if (rec.protocol !== PROTOCOL) {
		send({ type: "bye", reason: `protocol ${rec.protocol} not supported (host speaks ${PROTOCOL})` });
		realExit(1);
	}
	hello = rec;
	globalThis.__piToolkitHost = { agentDir: rec.agentDir, cwd: rec.cwd, mode: rec.mode };
	rt.snapshot = { cwd: rec.cwd, mode: rec.mode, hasUI: rec.hasUI, sessionFile: rec.sessionFile, sessionId: rec.sessionId, projectTrusted: rec.projectTrusted };
	const { extensions, errors } = await loadAll(rec);
	send({ type: "register", protocol: PROTOCOL, reloads: true, extensions, errors });
	registered = true;
}

/**
 * `reload` (after a session replacement, as pi 1.6.0 does): every extension's factory runs again
 * in this process. The modules are not imported again (Node's module cache keeps them, so
 * module-level state carries over); the old instances' `pi` and `ctx` objects throw pi's stale
 * message from now on, their handlers, tools, commands, flags and bus listeners are gone. The
 * answer is the new registrations, as in `register`.
 */
async function onReload(rec) {
	for (const ext of exts) if (ext) ext.stale = true;
	for (const [channel, list] of busListeners) busListeners.set(channel, list.filter((l) => !l.ext.stale));
	announceQueue.clear();
	exts.length = 0;
	try {
		answer(rec.id, { result: await loadAll(hello ?? {}) });
	} catch (e) {
		answer(rec.id, { error: thrownMessage(e) });
	}
}

// ---- requests
async function prefetch(ext) {
	const want = [];
	if (uses.has("sessionManager") || uses.has("getSessionName")) {
		if (rt.cache.__entriesLeaf !== (rt.snapshot.leafId ?? null) || !("session.getEntries" in rt.cache)) {
			want.push("session.getEntries", "session.getHeader");
		}
	}
	for (const m of ["getActiveTools", "getAllTools", "getCommands", "getContextUsage", "getSystemPrompt", "hasPendingMessages"]) if (uses.has(m)) want.push(m);
	// The model list does not change during a run: fetched once, for ctx.modelRegistry.
	if (uses.has("modelRegistry") && !("modelRegistry.getAll" in rt.cache)) want.push("modelRegistry.getAll");
	if (!want.length) return;
	await Promise.all(
		want.map((m) =>
			rt.call(ext, m, {}).then(
				(v) => {
					rt.cache[m] = v;
				},
				() => {},
			),
		),
	);
	if (want.includes("session.getEntries")) {
		rt.cache.__entriesLeaf = rt.snapshot.leafId ?? null;
		delete rt.cache.sessionName;
	}
}

function answer(id, out) {
	send({ type: "result", id, ...out });
}

async function onRequest(rec, run) {
	const ext = exts[rec.ext ?? 0];
	if (!ext) return answer(rec.id, { error: `pi-toolkit host: no loaded extension with index ${rec.ext}` });
	if (rec.ctx && typeof rec.ctx === "object") rt.snapshot = { ...rt.snapshot, ...rec.ctx };
	const ac = new AbortController();
	if (rec.ctx?.signalAborted) ac.abort();
	running.set(rec.id, ac);
	if (rec.type === "event") runningEvents.add(rec.id);
	stdinKeepsAlive();
	let out;
	try {
		await prefetch(ext);
		out = await owner.run(ext.slot ?? null, () => run(ext, ac.signal));
	} catch (e) {
		out = { error: thrownMessage(e) };
	}
	// Answered already when the loop ran dry (beforeExit).
	if (running.delete(rec.id)) answer(rec.id, out);
	runningEvents.delete(rec.id);
	stdinKeepsAlive();
}

async function runEvent(ext, signal, rec) {
	const event = rec.event ?? {};
	// pi-run sends an extension command as the event {type:"command", name, args}
	if (event.type === "command") return runCommand(ext, signal, event);
	const handlers = [...(ext.handlers.get(event.type) ?? [])];
	if (!handlers.length) return { result: null };
	const ctx = createContext(ext, rt, signal, "event");
	const { result, errors } = await runHandlers(event.type, handlers, event, ctx);
	if (errors.length && result === null) return errors.length === 1 ? { error: errors[0] } : { error: errors[0], errors };
	return errors.length ? { result, errors } : { result };
}

async function runTool(ext, signal, rec) {
	const def = ext.tools.get(rec.tool);
	if (!def) throw new Error(`Tool ${rec.tool} not found`);
	if (typeof def.execute !== "function") throw new Error(`Tool ${rec.tool} has no execute()`);
	const ctx = createContext(ext, rt, signal, "tool");
	let params = rec.params ?? {};
	if (typeof def.prepareArguments === "function") params = await def.prepareArguments(params);
	const onUpdate = (partialResult) => send({ type: "update", id: rec.id, partialResult: partialResult ?? null });
	const r = await def.execute(rec.toolCallId, params, signal, onUpdate, ctx);
	const result = r && typeof r === "object" ? { ...r } : { content: [{ type: "text", text: r === undefined ? "" : String(r) }] };
	if (!Array.isArray(result.content)) result.content = typeof result.content === "string" ? [{ type: "text", text: result.content }] : [];
	return { result };
}

async function runCommand(ext, signal, rec) {
	const cmd = ext.commands.get(rec.name);
	if (!cmd) throw new Error(`Unknown command: /${rec.name}`);
	const ctx = createContext(ext, rt, signal, "command");
	await cmd.handler(rec.args ?? "", ctx);
	return { result: null };
}

function onConfigure(rec) {
	const ext = exts[rec.ext ?? 0];
	if (ext && rec.flags && typeof rec.flags === "object") ext.flagValues = { ...rec.flags };
}

function onReturn(rec) {
	const p = pendingCalls.get(rec.id);
	if (!p) return;
	pendingCalls.delete(rec.id);
	stdinKeepsAlive();
	if (rec.error !== undefined && rec.error !== null) p.reject(new Error(String(rec.error)));
	else p.resolve(rec.result);
}

function dispatch(rec) {
	switch (rec.type) {
		case "hello":
			return onHello(rec);
		case "configure":
			return onConfigure(rec);
		case "reload":
			return onReload(rec);
		case "event":
			return onRequest(rec, (ext, signal) => runEvent(ext, signal, rec));
		case "execute":
			return onRequest(rec, (ext, signal) => runTool(ext, signal, rec));
		case "command":
			return onRequest(rec, (ext, signal) => runCommand(ext, signal, rec));
		case "cancel":
			running.get(rec.id)?.abort();
			return;
		case "return":
			return onReturn(rec);
		case "bye":
			realExit(0);
		default:
			return; // unknown records are ignored (forward compatible)
	}
}

let helloDone = Promise.resolve();
let inflight = 0; // requests received and not yet answered (waiting for hello included)
// stdin split into lines by hand (node:readline and its dependencies cost start-up time).
function onLine(line) {
	if (!line.trim()) return;
	let rec;
	try {
		rec = JSON.parse(line);
	} catch (e) {
		process.stderr.write(`pi-toolkit host: ignoring a line that is not JSON: ${thrownMessage(e)}\n`);
		return;
	}
	if (!rec || typeof rec !== "object" || typeof rec.type !== "string") return;
	// Everything after hello waits until loading is done; calls' returns never wait.
	if (rec.type === "hello") {
		inflight++;
		helloDone = Promise.resolve(dispatch(rec)).finally(() => inflight--);
		return;
	}
	if (rec.type === "return" || rec.type === "cancel") {
		dispatch(rec);
		return;
	}
	inflight++;
	helloDone.then(() => dispatch(rec)).finally(() => inflight--);
}
let pending = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => {
	const lines = (pending + chunk).split("\n");
	pending = lines.pop();
	for (const line of lines) onLine(line.endsWith("\r") ? line.slice(0, -1) : line);
});
// stdin's end: finish loading (bounded by the load timeouts) and what is running (at most 2 s
// more), then exit.
process.stdin.on("end", async () => {
	if (pending) onLine(pending);
	pending = "";
	await helloDone.catch(() => {});
	if (!inflight) realExit(0);
	const t = setInterval(() => inflight || realExit(0), 10);
	setTimeout(() => realExit(0), 2000).unref();
	t.unref?.();
});
