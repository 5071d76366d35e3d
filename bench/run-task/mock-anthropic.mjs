#!/usr/bin/env node
// Scripted mock of the Anthropic Messages API (streaming SSE and plain JSON), loopback only, for
// running Claude Code through bench/run.sh's four-turn task.  Dependency-free.
//
// Usage:
//   node mock-anthropic.mjs [--port N] [--script turns.json] [--log requests.jsonl] [--cwd DIR]
//                           [--default-text ok]
//
// Prints `PORT=<n>` as the first stdout line once listening (port 0 = any free port, the
// default).  Stops on SIGTERM / SIGINT.
//
// Script: a JSON array of turns, same shape as tests/oracle/mock-llm.mjs uses:
//   {"text", "reasoning", "tool_calls": [{"name", "arguments", "id"?}], "usage": {"prompt_tokens",
//    "completion_tokens"}}
// Only requests that offer tools (the agent's own turns) consume turns; side requests without
// tools (title / topic / quota probes) get "ok" and are logged with "turn": null.  Once the script
// runs out every request gets "ok".  "{{CWD}}" inside tool-call argument strings is replaced by
// --cwd (Claude Code's Read/Edit want absolute paths).
//
// Every request is appended to --log as one JSON line:
//   {"n", "method", "path", "turn": <index or null>, "model", "tools": <count>}
//
// Also: POST /v1/messages/count_tokens, GET /v1/models, GET /health.
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
const cwd = opt("--cwd", process.cwd());
const defaultText = opt("--default-text", "ok");

let turns = [];
if (scriptPath) {
	const parsed = JSON.parse(readFileSync(scriptPath, "utf8"));
	turns = Array.isArray(parsed) ? parsed : parsed.turns || [];
}
let nextTurn = 0;
let requestNo = 0;

function log(rec) {
	if (!logPath) return;
	try {
		appendFileSync(logPath, `${JSON.stringify(rec)}\n`);
	} catch (e) {
		process.stderr.write(`mock-anthropic: cannot write log: ${e.message}\n`);
	}
}

function subst(v) {
	if (typeof v === "string") return v.split("{{CWD}}").join(cwd);
	if (Array.isArray(v)) return v.map(subst);
	if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, subst(x)]));
	return v;
}

function blocksOf(turn, n) {
	const blocks = [];
	if (turn.reasoning) blocks.push({ type: "thinking", thinking: turn.reasoning, signature: `sig-mock-${n}` });
	if (turn.text) blocks.push({ type: "text", text: turn.text });
	(turn.tool_calls || []).forEach((tc, i) => {
		const input = typeof tc.arguments === "string" ? JSON.parse(subst(tc.arguments)) : subst(tc.arguments ?? {});
		blocks.push({ type: "tool_use", id: tc.id || `toolu_mock_${n}_${i}`, name: tc.name, input });
	});
	return blocks;
}

function splitText(s, size = 16) {
	const parts = [];
	for (let i = 0; i < s.length; i += size) parts.push(s.slice(i, i + size));
	return parts;
}

function sse(type, data) {
	return `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
}

function handleMessages(req, res, raw) {
	const n = ++requestNo;
	let body = {};
	try {
		body = JSON.parse(raw);
	} catch {}
	const hasTools = Array.isArray(body.tools) && body.tools.length > 0;
	let turnIndex = null;
	if (hasTools && nextTurn < turns.length) turnIndex = nextTurn++;
	const turn = turnIndex === null ? { text: defaultText } : turns[turnIndex];
	log({ n, method: req.method, path: req.url, turn: turnIndex, model: body.model, tools: hasTools ? body.tools.length : 0 });

	const blocks = blocksOf(turn, n);
	const stop = blocks.some((b) => b.type === "tool_use") ? "tool_use" : "end_turn";
	const u = turn.usage || {};
	const usage = {
		input_tokens: u.prompt_tokens ?? Math.max(1, Math.ceil(raw.length / 4)),
		output_tokens: u.completion_tokens ?? Math.max(1, Math.ceil(JSON.stringify(blocks).length / 4)),
		cache_creation_input_tokens: 0,
		cache_read_input_tokens: 0,
	};
	const message = {
		id: `msg_mock_${n}`,
		type: "message",
		role: "assistant",
		model: body.model || "mock-model",
		content: blocks,
		stop_reason: stop,
		stop_sequence: null,
		usage,
	};
	if (body.stream !== true) {
		res.writeHead(200, { "content-type": "application/json", "request-id": `req_mock_${n}` });
		res.end(JSON.stringify(message));
		return;
	}
	res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", "request-id": `req_mock_${n}` });
	let out = sse("message_start", {
		message: { ...message, content: [], stop_reason: null, usage: { ...usage, output_tokens: 1 } },
	});
	blocks.forEach((b, index) => {
		if (b.type === "thinking") {
			out += sse("content_block_start", { index, content_block: { type: "thinking", thinking: "", signature: "" } });
			for (const p of splitText(b.thinking)) out += sse("content_block_delta", { index, delta: { type: "thinking_delta", thinking: p } });
			out += sse("content_block_delta", { index, delta: { type: "signature_delta", signature: b.signature } });
		} else if (b.type === "text") {
			out += sse("content_block_start", { index, content_block: { type: "text", text: "" } });
			for (const p of splitText(b.text)) out += sse("content_block_delta", { index, delta: { type: "text_delta", text: p } });
		} else {
			out += sse("content_block_start", { index, content_block: { type: "tool_use", id: b.id, name: b.name, input: {} } });
			for (const p of splitText(JSON.stringify(b.input))) {
				out += sse("content_block_delta", { index, delta: { type: "input_json_delta", partial_json: p } });
			}
		}
		out += sse("content_block_stop", { index });
	});
	out += sse("message_delta", { delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: usage.output_tokens } });
	out += sse("message_stop", {});
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
			if (req.method === "POST" && /\/messages\/count_tokens$/.test(path)) {
				log({ n: ++requestNo, method: req.method, path: req.url, turn: null, countTokens: true });
				res.writeHead(200, { "content-type": "application/json" });
				return res.end(JSON.stringify({ input_tokens: Math.max(1, Math.ceil(raw.length / 4)) }));
			}
			if (req.method === "POST" && /\/messages$/.test(path)) return handleMessages(req, res, raw);
			if (req.method === "GET" && /\/models$/.test(path)) {
				res.writeHead(200, { "content-type": "application/json" });
				return res.end(JSON.stringify({ data: [{ type: "model", id: "mock-model", display_name: "Mock Model", created_at: "2026-01-01T00:00:00Z" }], has_more: false, first_id: "mock-model", last_id: "mock-model" }));
			}
			if (req.method === "GET" && path === "/health") {
				res.writeHead(200, { "content-type": "text/plain" });
				return res.end("ok\n");
			}
			log({ n: ++requestNo, method: req.method, path: req.url, turn: null, unhandled: true });
			res.writeHead(404, { "content-type": "application/json" });
			res.end(JSON.stringify({ type: "error", error: { type: "not_found_error", message: `mock-anthropic: no route ${req.method} ${path}` } }));
		} catch (e) {
			process.stderr.write(`mock-anthropic: ${e.stack || e}\n`);
			if (!res.headersSent) res.writeHead(500, { "content-type": "application/json" });
			res.end(JSON.stringify({ type: "error", error: { type: "api_error", message: String(e) } }));
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
