#!/usr/bin/env node
// Scripted mock of the OpenAI Chat Completions API, for driving the real pi
// (custom provider with api "openai-completions") on loopback only.
//
// Usage:
//   node mock-llm.mjs [--port N] [--script turns.json] [--log requests.jsonl]
//                     [--default-text ok] [--model mock-model]
//
// Prints `PORT=<n>` as the first stdout line once listening (port 0 = any free
// port, the default). Stops on SIGTERM / SIGINT.
//
// Script file: a JSON array of turns (or {"turns": [...]}) replayed in order, one per
// POST /v1/chat/completions request (a compaction / branch summarization request is
// just another turn). When the script runs out every request gets the text "ok".
// A turn:
//   {
//     "text": "assistant text",                   // optional
//     "reasoning": "thinking text",               // optional, sent as delta.reasoning_content
//     "tool_calls": [{"name": "read", "arguments": {"path": "a.txt"}, "id": "call_x"}],
//     "usage": {"prompt_tokens": 10, "completion_tokens": 5, "cached_tokens": 0},
//     "finish_reason": "stop" | "tool_calls" | "length",  // optional, inferred
//     "status": 500, "error": "boom",                     // optional: HTTP error instead
//     "match": "substring"   // optional: this turn is only used for a request whose JSON body
//                            // contains the substring (first unused matching turn wins);
//                            // requests matching no such turn take the next unused turn
//                            // without "match". Useful for parallel summarization calls.
//   }
// `arguments` may be an object (JSON-encoded for the wire) or a string (sent verbatim).
// Ids are deterministic: chatcmpl-mock-<n>, call_<n>_<i> unless the turn gives one.
//
// Every request is appended to --log as one JSON line:
//   {"n": <1-based request no.>, "method", "path", "turn": <index or null>, "body": <parsed JSON or raw string>}
//
// Also: GET /v1/models (one model, "mock-model"), GET /health.
import { createServer } from "node:http";
import { appendFileSync, readFileSync } from "node:fs";

const args = process.argv.slice(2);
function opt(name, def) {
	const i = args.indexOf(name);
	return i >= 0 && i + 1 < args.length ? args[i + 1] : def;
}
const port = Number(opt("--port", "0"));
const scriptPath = opt("--script");
const logPath = opt("--log");
const defaultText = opt("--default-text", "ok");
const modelId = opt("--model", "mock-model");

let turns = [];
if (scriptPath) {
	const parsed = JSON.parse(readFileSync(scriptPath, "utf8"));
	turns = Array.isArray(parsed) ? parsed : parsed.turns || [];
}
const used = new Set();
function pickTurn(raw) {
	for (let i = 0; i < turns.length; i++) {
		if (!used.has(i) && typeof turns[i].match === "string" && raw.includes(turns[i].match)) {
			used.add(i);
			return i;
		}
	}
	for (let i = 0; i < turns.length; i++) {
		if (!used.has(i) && typeof turns[i].match !== "string") {
			used.add(i);
			return i;
		}
	}
	return null;
}
let requestNo = 0;
const CREATED = 1767225600; // fixed timestamp (2026-01-01T00:00:00Z) for determinism

function log(rec) {
	if (!logPath) return;
	try {
		appendFileSync(logPath, `${JSON.stringify(rec)}\n`);
	} catch (e) {
		process.stderr.write(`mock-llm: cannot write log: ${e.message}\n`);
	}
}

function usageOf(turn, body) {
	const u = turn.usage || {};
	let prompt = u.prompt_tokens;
	if (prompt === undefined) {
		// crude but deterministic-ish estimate: 1 token per 4 chars of the messages
		prompt = Math.max(1, Math.ceil(JSON.stringify(body?.messages ?? "").length / 4));
	}
	const completion =
		u.completion_tokens ??
		Math.max(
			1,
			Math.ceil(((turn.text || "").length + (turn.reasoning || "").length + JSON.stringify(turn.tool_calls || []).length) / 4),
		);
	const usage = { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
	if (u.cached_tokens !== undefined) usage.prompt_tokens_details = { cached_tokens: u.cached_tokens };
	return usage;
}

function toolCallsOf(turn, n) {
	return (turn.tool_calls || []).map((tc, i) => ({
		id: tc.id || `call_${n}_${i}`,
		type: "function",
		function: {
			name: tc.name,
			arguments: typeof tc.arguments === "string" ? tc.arguments : JSON.stringify(tc.arguments ?? {}),
		},
	}));
}

function chunk(n, delta, finish, usage) {
	const c = {
		id: `chatcmpl-mock-${n}`,
		object: "chat.completion.chunk",
		created: CREATED,
		model: modelId,
		choices: delta === null ? [] : [{ index: 0, delta, finish_reason: finish ?? null }],
	};
	if (usage) c.usage = usage;
	return `data: ${JSON.stringify(c)}\n\n`;
}

function splitText(s, size = 16) {
	const parts = [];
	for (let i = 0; i < s.length; i += size) parts.push(s.slice(i, i + size));
	return parts;
}

function handleChat(req, res, raw) {
	const n = ++requestNo;
	let body;
	try {
		body = JSON.parse(raw);
	} catch {
		body = raw;
	}
	const turnIndex = pickTurn(raw);
	const turn = turnIndex === null ? { text: defaultText } : turns[turnIndex];
	log({ n, method: req.method, path: req.url, turn: turnIndex, body });

	if (turn.status) {
		res.writeHead(turn.status, { "content-type": "application/json" });
		res.end(JSON.stringify({ error: { message: turn.error || "mock error", type: "mock_error", code: null } }));
		return;
	}
	const toolCalls = toolCallsOf(turn, n);
	const finish = turn.finish_reason || (toolCalls.length ? "tool_calls" : "stop");
	const usage = usageOf(turn, body);
	const stream = typeof body === "object" && body && body.stream === true;

	if (!stream) {
		const message = { role: "assistant", content: turn.text ?? null };
		if (turn.reasoning) message.reasoning_content = turn.reasoning;
		if (toolCalls.length) message.tool_calls = toolCalls;
		res.writeHead(200, { "content-type": "application/json" });
		res.end(
			JSON.stringify({
				id: `chatcmpl-mock-${n}`,
				object: "chat.completion",
				created: CREATED,
				model: modelId,
				choices: [{ index: 0, message, finish_reason: finish }],
				usage,
			}),
		);
		return;
	}

	res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
	let out = chunk(n, { role: "assistant", content: "" });
	for (const part of splitText(turn.reasoning || "")) out += chunk(n, { reasoning_content: part });
	for (const part of splitText(turn.text || "")) out += chunk(n, { content: part });
	toolCalls.forEach((tc, i) => {
		out += chunk(n, {
			tool_calls: [{ index: i, id: tc.id, type: "function", function: { name: tc.function.name, arguments: "" } }],
		});
		for (const part of splitText(tc.function.arguments)) {
			out += chunk(n, { tool_calls: [{ index: i, function: { arguments: part } }] });
		}
	});
	out += chunk(n, {}, finish);
	out += chunk(n, null, null, usage); // stream_options.include_usage style final chunk
	out += "data: [DONE]\n\n";
	res.end(out);
}

const server = createServer((req, res) => {
	const chunks = [];
	req.on("data", (c) => chunks.push(c));
	req.on("error", () => {});
	req.on("end", () => {
		const raw = Buffer.concat(chunks).toString("utf8");
		try {
			const path = (req.url || "").split("?")[0];
			if (req.method === "POST" && /\/chat\/completions$/.test(path)) return handleChat(req, res, raw);
			if (req.method === "GET" && /\/models$/.test(path)) {
				res.writeHead(200, { "content-type": "application/json" });
				return res.end(JSON.stringify({ object: "list", data: [{ id: modelId, object: "model", created: CREATED, owned_by: "mock" }] }));
			}
			if (req.method === "GET" && path === "/health") {
				res.writeHead(200, { "content-type": "text/plain" });
				return res.end("ok\n");
			}
			log({ n: ++requestNo, method: req.method, path: req.url, turn: null, body: raw, unhandled: true });
			res.writeHead(404, { "content-type": "application/json" });
			res.end(JSON.stringify({ error: { message: `mock-llm: no route ${req.method} ${path}`, type: "not_found" } }));
		} catch (e) {
			process.stderr.write(`mock-llm: ${e.stack || e}\n`);
			if (!res.headersSent) res.writeHead(500, { "content-type": "application/json" });
			res.end(JSON.stringify({ error: { message: String(e), type: "mock_internal" } }));
		}
	});
});

server.listen(port, "127.0.0.1", () => {
	process.stdout.write(`PORT=${server.address().port}\n`);
});
function stop() {
	server.close(() => process.exit(0));
	server.closeAllConnections?.();
	setTimeout(() => process.exit(0), 500).unref();
}
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
