// How several handlers of ONE extension for the same event combine into that extension's one
// answer, following pi 1.6.0's rules; the toolkit's runner then
// combines the answers of all extensions by the same rules. Handlers run in registration
// order, awaited one by one; each later handler sees what the earlier ones changed (a
// transformed input, a mutated tool `input`, patched tool results, replaced messages).
//
// A throwing handler: for `tool_call` the throw escapes (fail closed: later handlers are
// skipped and the event is answered with `error`); for every other event it is collected and
// the chain goes on. The collected messages travel in the answer's `errors` list (or as `error`
// when no handler produced anything else), so the toolkit can report each one.

const json = (v) => {
	try {
		return JSON.stringify(v);
	} catch {
		return undefined;
	}
};
const isObj = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

/** The text pi reports for a thrown value. */
export function thrownMessage(e) {
	if (e instanceof Error) return e.message;
	if (e && typeof e === "object" && typeof e.message === "string") return e.message;
	return String(e);
}

/**
 * Runs `handlers` for `event` and returns `{result, errors}`: `result` is this extension's
 * composed answer (null when nothing to say), `errors` the messages of handlers that threw.
 * Throws for a `tool_call` handler's throw.
 */
export async function runHandlers(type, handlers, event, ctx) {
	const errors = [];
	const call = async (h) => {
		try {
			return { ok: true, value: await h(event, ctx) };
		} catch (e) {
			errors.push(thrownMessage(e));
			return { ok: false };
		}
	};
	let result = null;
	switch (type) {
		case "tool_call": {
			const before = json(event.input);
			for (const h of handlers) {
				let r;
				try {
					r = await h(event, ctx);
				} catch (e) {
					if (e instanceof Error) throw e;
					throw new Error(`Extension failed, blocking execution: ${thrownMessage(e)}`);
				}
				if (isObj(r) && r.block) {
					result = { block: true };
					if (r.reason !== undefined) result.reason = r.reason;
					if (r.terminate !== undefined) result.terminate = r.terminate;
					return { result, errors };
				}
			}
			if (json(event.input) !== before) result = { input: event.input };
			break;
		}
		case "input": {
			let changed = false;
			for (const h of handlers) {
				const r = await call(h);
				if (!r.ok || !isObj(r.value)) continue;
				if (r.value.action === "handled") return { result: { action: "handled" }, errors };
				if (r.value.action === "transform") {
					if (typeof r.value.text === "string") event.text = r.value.text;
					if (r.value.images !== undefined) event.images = r.value.images;
					changed = true;
				}
			}
			if (changed) result = { action: "transform", text: event.text, images: event.images };
			break;
		}
		case "before_agent_start": {
			const messages = [];
			let systemPrompt;
			const before = json(event.systemPromptOptions);
			for (const h of handlers) {
				const r = await call(h);
				if (!r.ok || !isObj(r.value)) continue;
				if (r.value.message !== undefined) messages.push(r.value.message);
				if (r.value.systemPrompt !== undefined) {
					systemPrompt = r.value.systemPrompt;
					try {
						Object.defineProperty(event, "systemPrompt", { value: systemPrompt, configurable: true, enumerable: true, writable: true });
					} catch {}
				}
			}
			const out = {};
			if (messages.length === 1) out.message = messages[0];
			if (messages.length > 1) out.messages = messages;
			if (systemPrompt !== undefined) out.systemPrompt = systemPrompt;
			if (json(event.systemPromptOptions) !== before) out.systemPromptOptions = event.systemPromptOptions;
			if (Object.keys(out).length) result = out;
			break;
		}
		case "context":
		case "context_with_system": {
			const before = json(event.messages);
			for (const h of handlers) {
				const r = await call(h);
				if (r.ok && isObj(r.value) && Array.isArray(r.value.messages)) event.messages = r.value.messages;
			}
			if (json(event.messages) !== before) result = { messages: event.messages };
			break;
		}
		case "before_provider_request": {
			const before = json(event.payload);
			for (const h of handlers) {
				const r = await call(h);
				if (r.ok && r.value !== undefined) event.payload = r.value;
			}
			if (json(event.payload) !== before) result = event.payload;
			break;
		}
		case "before_provider_headers": {
			const before = json(event.headers);
			for (const h of handlers) await call(h);
			if (json(event.headers) !== before) result = { headers: event.headers };
			break;
		}
		case "message_end": {
			const before = json(event.message);
			for (const h of handlers) {
				const r = await call(h);
				if (r.ok && isObj(r.value) && isObj(r.value.message)) event.message = r.value.message;
			}
			if (json(event.message) !== before) result = { message: event.message };
			break;
		}
		case "tool_result": {
			const patch = {};
			for (const h of handlers) {
				const r = await call(h);
				if (!r.ok || !isObj(r.value)) continue;
				for (const k of ["content", "details", "structuredContent", "isError", "usage"]) {
					if (r.value[k] !== undefined) {
						patch[k] = r.value[k];
						event[k] = r.value[k];
					}
				}
				if (r.value.content !== undefined && r.value.structuredContent === undefined) {
					delete patch.structuredContent;
					delete event.structuredContent;
				}
			}
			if (Object.keys(patch).length) result = patch;
			break;
		}
		case "turn_end":
		case "agent_before_settle": {
			const out = {};
			// pi-run sent the preview with the drafts proposed before this extension; each later
			// handler sees it rebuilt from the proposal so far.
			const base = isObj(event.context) ? committedContext(event.context, event.entries) : null;
			for (const h of handlers) {
				const r = await call(h);
				if (!r.ok || !isObj(r.value)) continue;
				if (r.value.entries !== undefined) event.entries = out.entries = r.value.entries;
				if (r.value.continue !== undefined) event.continue = out.continue = r.value.continue;
				if (base && r.value.entries !== undefined) event.context = boundaryPreview(base, event.entries);
			}
			if (Object.keys(out).length) result = out;
			break;
		}
		case "project_trust": {
			for (const h of handlers) {
				const r = await call(h);
				if (!r.ok || !isObj(r.value)) continue;
				if (r.value.trusted === "yes" || r.value.trusted === "no") return { result: r.value, errors };
				result = r.value;
			}
			break;
		}
		case "session_before_switch":
		case "session_before_fork":
		case "session_before_compact":
		case "session_before_tree":
		case "cache_warming_decision": {
			for (const h of handlers) {
				const r = await call(h);
				if (!r.ok || r.value === undefined) continue;
				result = r.value;
				if (isObj(r.value) && r.value.cancel === true) return { result, errors };
			}
			break;
		}
		case "resources_discover": {
			const out = {};
			for (const h of handlers) {
				const r = await call(h);
				if (!r.ok || !isObj(r.value)) continue;
				for (const k of ["skillPaths", "promptPaths", "themePaths"]) {
					if (Array.isArray(r.value[k])) out[k] = [...(out[k] ?? []), ...r.value[k]];
				}
			}
			if (Object.keys(out).length) result = out;
			break;
		}
		case "user_bash": {
			for (const h of handlers) {
				const r = await call(h);
				if (!r.ok || r.value === undefined) continue;
				if (isObj(r.value) && isObj(r.value.result)) return { result: { result: r.value.result }, errors };
				if (isObj(r.value) && isObj(r.value.operations)) {
					errors.push("pi-toolkit host: user_bash { operations } is not available");
					continue;
				}
				throw new Error(
					"Invalid user_bash handler result: return undefined for local execution or exactly one valid { operations } or { result } object",
				);
			}
			break;
		}
		default:
			for (const h of handlers) await call(h);
	}
	return { result, errors };
}

// ---- boundary previews (the same rules as pi-run's `agent::hooks::boundary_preview`)
const draftList = (d) => (Array.isArray(d) ? d : []);
const isCustomMessage = (d) => isObj(d) && d.type === "custom_message";

/** A preview without the drafts it was built with: the committed branch's context. */
function committedContext(context, drafts) {
	const list = (k) => (Array.isArray(context[k]) ? context[k] : []);
	const k = draftList(drafts).length;
	const m = draftList(drafts).filter(isCustomMessage).length;
	const cut = (a, n) => (n ? a.slice(0, Math.max(0, a.length - n)) : a.slice());
	const llm = cut(list("llmMessages"), m);
	return {
		contextEntries: cut(list("contextEntries"), k),
		contextMessages: cut(list("contextMessages"), m),
		llmMessages: llm,
		pendingMessages: list("pendingMessages"),
		canContinue: canContinue(llm) || list("pendingMessages").length > 0 || (k === 0 && context.canContinue === true),
	};
}

function canContinue(llm) {
	const role = llm.length ? llm[llm.length - 1]?.role : undefined;
	return typeof role === "string" && role !== "assistant" && role !== "system";
}

const hex8 = () => Math.floor(Math.random() * 0x100000000).toString(16).padStart(8, "0");

/** The committed context with `drafts` added, as pi shows it to the next handler. */
export function boundaryPreview(base, drafts) {
	const entries = base.contextEntries.slice();
	const messages = base.contextMessages.slice();
	const llm = base.llmMessages.slice();
	const now = Date.now();
	const iso = new Date(now).toISOString();
	let parent = entries.length ? (entries[entries.length - 1]?.sourceEntry?.id ?? null) : null;
	for (const d of draftList(drafts)) {
		const id = hex8();
		const sourceEntry = { ...(isObj(d) ? d : {}), id, parentId: parent, timestamp: iso };
		parent = id;
		const made = [];
		if (isCustomMessage(d)) {
			const m = { role: "custom" };
			for (const k of ["customType", "content", "display", "details"]) if (d[k] !== undefined) m[k] = d[k];
			m.timestamp = now;
			messages.push(m);
			made.push(m);
			llm.push({ role: "user", content: typeof d.content === "string" ? [{ type: "text", text: d.content }] : d.content, timestamp: now });
		}
		entries.push({ sourceEntry, messages: made });
	}
	const waiting = base.pendingMessages.length > 0;
	return {
		contextEntries: entries,
		contextMessages: messages,
		llmMessages: llm,
		pendingMessages: base.pendingMessages,
		canContinue: canContinue(llm) || waiting || (!draftList(drafts).length && base.canContinue === true),
	};
}
