// pi 1.6.0's extension API (`pi.*`) and contexts (`ctx.*`) for one extension, over
// the pi-ext/1 protocol. Registrations are recorded on the extension and announced to the
// toolkit (in `register`, later in `register_more`); actions that change the run are `call`s to
// the toolkit; `pi.exec` and the `pi.events` bus are local. pi's synchronous getters
// (`getActiveTools`, `sessionManager.getEntries`, `ctx.getContextUsage`, …) read a cache the
// host refreshes before it runs a handler (see `prefetch` in host.mjs). TUI-only APIs are
// accepted and do nothing; what the toolkit cannot give throws
// `pi-toolkit host: <api> is not available`.
import { createRequire } from "node:module";
import { inertObject, unavailable } from "./modules/inert.mjs";

const NOT_INITIALIZED = "Extension runtime not initialized. Action methods cannot be called during extension loading.";
/** pi 1.6.0's error for a `pi` or `ctx` of an instance a session replacement replaced (observed). */
export const STALE =
	"This extension ctx is stale after session replacement or reload. Do not use a captured pi or command ctx after ctx.newSession(), ctx.fork(), ctx.switchSession(), or ctx.reload(). For newSession, fork, and switchSession, move post-replacement work into withSession and use the ctx passed to withSession. For reload, do not use the old ctx after await ctx.reload().";

/**
 * `obj` as the extension sees it: once its instance is stale (the host's `reload`), reading any
 * property or calling a method taken from it earlier throws {@link STALE}, as pi does.
 */
function guarded(ext, obj) {
	return new Proxy(obj, {
		get(target, key) {
			if (ext.stale) throw new Error(STALE);
			const v = Reflect.get(target, key);
			if (typeof v !== "function") return v;
			return function (...args) {
				if (ext.stale) throw new Error(STALE);
				return v.apply(target, args);
			};
		},
	});
}

const MAX_BUFFER = 256 * 1024 * 1024;
const SIGNALS = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGABRT: 6, SIGKILL: 9, SIGPIPE: 13, SIGALRM: 14, SIGTERM: 15 };

/** `pi.exec`: no shell; `{stdout, stderr, code, killed, truncated}`; SIGTERM then SIGKILL after 5 s. */
export function execLocal(command, args = [], options = {}, defaultCwd = process.cwd()) {
	return new Promise((resolve) => {
		let stdout = "", stderr = "", size = 0, truncated = false, killed = false, done = false, timer, hard;
		const finish = (code) => {
			if (done) return;
			done = true;
			clearTimeout(timer);
			clearTimeout(hard);
			options.signal?.removeEventListener?.("abort", onAbort);
			resolve({ stdout, stderr, code, killed, truncated });
		};
		let child;
		try {
			// node:child_process is loaded on first use, not at start-up.
			const { spawn } = createRequire(import.meta.url)("node:child_process");
			child = spawn(command, Array.isArray(args) ? args.map(String) : [], {
				cwd: options.cwd ?? defaultCwd,
				env: options.env ?? process.env,
				stdio: ["ignore", "pipe", "pipe"],
			});
		} catch (e) {
			stderr = e && e.message ? e.message : String(e);
			return finish(1);
		}
		const max = options.maxBuffer ?? MAX_BUFFER;
		const take = (which) => (chunk) => {
			if (truncated) return;
			const s = chunk.toString("utf8");
			size += chunk.length;
			if (size > max) {
				truncated = true;
				return;
			}
			if (which === "out") stdout += s;
			else stderr += s;
		};
		child.stdout.on("data", take("out"));
		child.stderr.on("data", take("err"));
		const kill = () => {
			if (done || killed) return;
			killed = true;
			try {
				child.kill("SIGTERM");
			} catch {}
			hard = setTimeout(() => {
				try {
					child.kill("SIGKILL");
				} catch {}
			}, 5000);
			hard.unref?.();
		};
		const onAbort = () => kill();
		if (options.signal) {
			if (options.signal.aborted) kill();
			else options.signal.addEventListener?.("abort", onAbort, { once: true });
		}
		if (options.timeout && options.timeout > 0) timer = setTimeout(kill, options.timeout);
		child.on("error", (e) => {
			stderr = e && e.message ? e.message : String(e);
			finish(1);
		});
		const codeOf = (code, signal) => code ?? (signal ? 128 + (SIGNALS[signal] ?? 0) : 1);
		child.on("close", (code, signal) => finish(codeOf(code, signal)));
		// A killed command's grandchildren may hold the pipes open: do not wait for them.
		child.on("exit", (code, signal) => {
			if (!killed) return;
			child.stdout.destroy();
			child.stderr.destroy();
			finish(codeOf(code, signal));
		});
	});
}

/** The `pi` object one extension's factory receives. */
export function createExtensionAPI(ext, rt) {
	const action = (name, fn) =>
		function (...args) {
			if (ext.loading) throw new Error(NOT_INITIALIZED);
			return fn(...args);
		};
	const notAvailable = (name) => () => {
		throw unavailable(`pi.${name}`);
	};
	const pi = {
		on(event, handler) {
			if (typeof handler !== "function") return () => {};
			const list = ext.handlers.get(event) ?? [];
			const entry = (...a) => handler(...a);
			list.push(entry);
			ext.handlers.set(event, list);
			rt.announce(ext, { events: [event] });
			return () => {
				const l = ext.handlers.get(event);
				if (!l) return;
				const i = l.indexOf(entry);
				if (i >= 0) l.splice(i, 1);
			};
		},
		registerTool(def) {
			if (!def || typeof def.name !== "string" || !def.name) throw new Error(`Tool registered by extension "${ext.path}" must have a non-empty string name.`);
			ext.tools.set(def.name, def);
			rt.announce(ext, { tools: [def.name] });
		},
		registerCommand(name, options) {
			if (typeof name !== "string" || !name.trim()) {
				throw new Error(`Command registered by extension "${ext.path}" must have a non-empty string name. Use pi.registerCommand("name", { description, handler }).`);
			}
			if (!options || typeof options.handler !== "function") throw new Error(`Command "/${name}" registered by extension "${ext.path}" must define handler().`);
			ext.commands.set(name, options);
			rt.announce(ext, { commands: [name] });
		},
		registerShortcut(key, options) {
			ext.shortcuts.set(String(key), options);
		},
		registerFlag(name, options = {}) {
			const type = options.type ?? "boolean";
			if (options.default !== undefined && typeof options.default !== type) {
				throw new Error(`Invalid default for flag "${name}": expected ${type}, got ${typeof options.default}`);
			}
			ext.flags.set(name, { ...options, type });
		},
		registerMessageRenderer() {},
		registerMarkdownTransformer() {},
		registerEntryRenderer() {},
		registerToolRenderer() {},
		getFlag(name) {
			const f = ext.flags.get(name);
			if (!f) return undefined;
			return Object.prototype.hasOwnProperty.call(ext.flagValues, name) ? ext.flagValues[name] : f.default;
		},
		sendMessage: action("sendMessage", (message, options) => rt.fire(ext, "sendMessage", { message, options })),
		sendUserMessage: action("sendUserMessage", (content, options) => rt.fire(ext, "sendUserMessage", { content, options })),
		appendEntry: action("appendEntry", (customType, data) => rt.fire(ext, "appendEntry", { customType, data })),
		setSessionName: action("setSessionName", (name) => {
			rt.cache.sessionName = typeof name === "string" && name.trim() ? name.trim() : undefined;
			return rt.fire(ext, "setSessionName", { name });
		}),
		getSessionName: action("getSessionName", () => rt.sessionName()),
		setLabel: action("setLabel", (entryId, label) => rt.fire(ext, "setLabel", { entryId, label })),
		exec: (command, args, options) => execLocal(command, args, options, rt.hello.cwd),
		getActiveTools: action("getActiveTools", () => rt.cached("getActiveTools", [])),
		getAllTools: action("getAllTools", () => rt.cached("getAllTools", [])),
		getSettings: action("getSettings", () => structuredClone(rt.hello.settings ?? {})),
		setActiveTools: action("setActiveTools", (names) => {
			rt.cache.getActiveTools = Array.isArray(names) ? [...names] : rt.cache.getActiveTools;
			return rt.fire(ext, "setActiveTools", { names });
		}),
		getCommands: action("getCommands", () => rt.cached("getCommands", [])),
		setModel: action("setModel", async (model) => {
			const r = await rt.call(ext, "setModel", { provider: model?.provider, id: model?.id });
			if (r === true) {
				// The handler reads the new model (and the clamped level) at once, as in pi.
				const level = await rt.call(ext, "getThinkingLevel", {}).catch(() => undefined);
				rt.snapshot = { ...rt.snapshot, model: { provider: model.provider, id: model.id }, ...(typeof level === "string" ? { thinkingLevel: level } : {}) };
			}
			return r === true;
		}),
		getThinkingLevel: action("getThinkingLevel", () => rt.snapshot.thinkingLevel ?? "off"),
		setThinkingLevel: action("setThinkingLevel", (level) => {
			// pi's setter is synchronous: the level reads back at once (pi-run clamps it to the model).
			if (typeof level === "string") rt.snapshot = { ...rt.snapshot, thinkingLevel: level };
			return rt.fire(ext, "setThinkingLevel", { level });
		}),
		registerProvider: notAvailable("registerProvider"),
		unregisterProvider: notAvailable("unregisterProvider"),
		registerMcpServer: notAvailable("registerMcpServer"),
		unregisterMcpServer: notAvailable("unregisterMcpServer"),
		getMcpServers: () => [],
		registerVirtualModel: notAvailable("registerVirtualModel"),
		unregisterVirtualModel: notAvailable("unregisterVirtualModel"),
		events: rt.events(ext),
	};
	return guarded(ext, pi);
}

/** `ctx.ui`: dialogs are calls to the toolkit when it has a UI, pi's no-UI defaults otherwise. */
function createUI(ext, rt) {
	const hasUI = !!rt.hello.hasUI;
	const dialog = (method, params, fallback, opts) => {
		if (!hasUI) return Promise.resolve(fallback);
		const signal = opts?.signal;
		if (signal?.aborted) return Promise.resolve(fallback);
		if (typeof opts?.timeout === "number") params.timeout = opts.timeout;
		return new Promise((resolve) => {
			let settled = false;
			const done = (v) => {
				if (settled) return;
				settled = true;
				signal?.removeEventListener?.("abort", onAbort);
				resolve(v);
			};
			const onAbort = () => done(fallback);
			signal?.addEventListener?.("abort", onAbort, { once: true });
			rt.call(ext, method, params, { ui: true }).then(
				(v) => done(v === null || v === undefined ? fallback : v),
				() => done(fallback),
			);
		});
	};
	const fire = (method, params) => {
		if (hasUI) rt.call(ext, method, params).catch(() => {});
	};
	const noop = () => {};
	return {
		select: (title, options, opts) => dialog("ui.select", { title, options }, undefined, opts),
		confirm: (title, message, opts) => dialog("ui.confirm", { title, message }, false, opts).then((v) => v === true),
		input: (title, placeholder, opts) => dialog("ui.input", placeholder === undefined ? { title } : { title, placeholder }, undefined, opts),
		notify: (message, notifyType) => fire("ui.notify", notifyType === undefined ? { message } : { message, notifyType }),
		onTerminalInput: () => noop,
		setStatus: (statusKey, statusText) => fire("ui.setStatus", statusText === undefined ? { statusKey } : { statusKey, statusText }),
		setWorkingMessage: noop,
		setWorkingVisible: noop,
		setWorkingIndicator: noop,
		setHiddenThinkingLabel: noop,
		setWidget: (widgetKey, content, options) => {
			if (content !== undefined && !(Array.isArray(content) && content.every((l) => typeof l === "string"))) return;
			const p = { widgetKey };
			if (content !== undefined) p.widgetLines = content;
			if (options?.placement !== undefined) p.widgetPlacement = options.placement;
			fire("ui.setWidget", p);
		},
		setFooter: noop,
		setHeader: noop,
		setTitle: (title) => fire("ui.setTitle", { title }),
		custom: async () => undefined,
		pasteToEditor: (text) => fire("ui.setEditorText", { text }),
		setEditorText: (text) => fire("ui.setEditorText", { text }),
		getEditorText: () => "",
		editor: (title, prefill) => dialog("ui.editor", prefill === undefined ? { title } : { title, prefill }, undefined, undefined),
		addAutocompleteProvider: noop,
		setEditorComponent: noop,
		getEditorComponent: () => undefined,
		theme: inertObject(),
		getAllThemes: () => [],
		getTheme: () => undefined,
		setTheme: () => ({ success: false, error: rt.hello.mode === "rpc" ? "Theme switching not supported in RPC mode" : "UI not available" }),
		getToolsExpanded: () => false,
		setToolsExpanded: noop,
	};
}

/** `ctx.sessionManager`: read-only, over the entries the host fetched for this handler. */
function createSessionManager(rt) {
	const entries = () => rt.cached("session.getEntries", []);
	const byId = () => new Map(entries().map((e) => [e.id, e]));
	const leafId = () => (rt.snapshot.leafId !== undefined ? rt.snapshot.leafId : rt.cached("session.getLeafId", null));
	const branch = (fromId) => {
		const map = byId();
		const out = [];
		let id = fromId ?? leafId();
		const seen = new Set();
		while (id && map.has(id) && !seen.has(id)) {
			seen.add(id);
			const e = map.get(id);
			out.unshift(e);
			id = e.parentId;
		}
		return out;
	};
	return {
		getCwd: () => rt.hello.cwd,
		getSessionId: () => rt.snapshot.sessionId ?? rt.hello.sessionId,
		getSessionFile: () => rt.snapshot.sessionFile ?? rt.hello.sessionFile ?? undefined,
		getSessionDir: () => (rt.hello.sessionFile ? rt.hello.sessionFile.replace(/\/[^/]*$/, "") : undefined),
		isPersisted: () => !!(rt.snapshot.sessionFile ?? rt.hello.sessionFile),
		getSessionName: () => rt.sessionName(),
		getHeader: () => rt.cached("session.getHeader", null),
		getEntries: () => [...entries()],
		getEntryCount: () => entries().length,
		getEntry: (id) => byId().get(id),
		getLeafId: () => leafId(),
		getLeafEntry: () => byId().get(leafId()),
		getChildren: (id) => entries().filter((e) => e.parentId === id),
		getBranch: (fromId) => branch(fromId),
		getLabel: (id) => {
			let label;
			for (const e of entries()) if (e.type === "label" && e.targetId === id) label = e.label;
			return label;
		},
		getTree: () => {
			const nodes = new Map(entries().map((e) => [e.id, { entry: e, children: [] }]));
			const roots = [];
			for (const n of nodes.values()) {
				const p = n.entry.parentId && nodes.get(n.entry.parentId);
				if (p) p.children.push(n);
				else roots.push(n);
			}
			return roots;
		},
	};
}

/**
 * The context a handler, tool or command receives. `kind` is `event`, `tool` or `command`;
 * `signal` aborts when the toolkit cancels the request.
 */
export function createContext(ext, rt, signal, kind = "event") {
	const snap = rt.snapshot;
	const notAvailable = (name) => () => {
		throw unavailable(`ctx.${name}`);
	};
	const ctx = {
		ui: createUI(ext, rt),
		mode: snap.mode ?? rt.hello.mode,
		hasUI: snap.hasUI ?? !!rt.hello.hasUI,
		cwd: snap.cwd ?? rt.hello.cwd,
		sessionManager: createSessionManager(rt),
		modelRegistry: new Proxy(
			// pi-run's models (models.json and the built-in catalogue, as pi's objects), fetched once
			// before the first handler of an extension whose source names modelRegistry. find() is
			// undefined for a model that does not exist, as in pi.
			{
				find: (provider, id) => rt.cached("modelRegistry.getAll", []).find((m) => m && m.provider === provider && m.id === id),
				getAll: () => [...rt.cached("modelRegistry.getAll", [])],
			},
			{ get: (t, p) => (p in t ? t[p] : typeof p === "string" && p !== "then" ? notAvailable(`modelRegistry.${p}`) : undefined) },
		),
		get model() {
			return rt.snapshot.model ?? snap.model ?? undefined;
		},
		scopedModels: [],
		get thinkingLevel() {
			return rt.snapshot.thinkingLevel ?? snap.thinkingLevel ?? "off";
		},
		isIdle: () => snap.isIdle !== false,
		isProjectTrusted: () => (snap.projectTrusted ?? rt.hello.projectTrusted) === true,
		signal,
		abort: () => {
			rt.call(ext, "abort", {}).catch(() => {});
		},
		hasPendingMessages: () => rt.cached("hasPendingMessages", false) === true,
		shutdown: () => {
			rt.call(ext, "shutdown", {}).catch(() => {});
		},
		getContextUsage: () => rt.cached("getContextUsage", undefined) ?? undefined,
		compact: notAvailable("compact"),
		getSystemPrompt: () => rt.cached("getSystemPrompt", ""),
	};
	if (kind === "tool") {
		ctx.tools = [];
		ctx.executeTool = notAvailable("executeTool");
	}
	if (kind === "command") {
		ctx.waitForIdle = () => rt.call(ext, "waitForIdle", {}).then(() => undefined, () => undefined);
		ctx.getSystemPromptOptions = notAvailable("getSystemPromptOptions");
		ctx.newSession = notAvailable("newSession");
		ctx.fork = notAvailable("fork");
		ctx.navigateTree = notAvailable("navigateTree");
		ctx.switchSession = notAvailable("switchSession");
		ctx.reload = notAvailable("reload");
	}
	return guarded(ext, ctx);
}
