#!/usr/bin/env node
// Scripted mock of the OpenAI Responses API (streaming SSE), loopback only, for running Codex
// through bench/run.sh's four-turn task.  Dependency-free.
//
// Usage:
//   node mock-responses.mjs [--port N] [--script turns.json] [--log requests.jsonl] [--default-text ok]
//
// Prints `PORT=<n>` as the first stdout line once listening (port 0 = any free port).  Stops on
// SIGTERM / SIGINT.  Script: a JSON array of turns shaped like tests/oracle/mock-llm.mjs's
// ({"text", "reasoning", "tool_calls": [{"name", "arguments"}], "usage"}); each POST .../responses
// that offers tools takes the next turn (others, and all requests after the script, get "ok").
// Every request is appended to --log as {"n", "method", "path", "turn", "model", "tools"}.
import { createServer } from "node:http";
import { appendFileSync, readFileSync } from "node:fs";

const args = process.argv.slice(2);
const opt = (name, def) => {
	const i = args.indexOf(name);
	return i >= 0 && i + 1 < args.length ? args[i + 1] : def;
};
const port = Number(opt("--port", "0"));
const scriptPath = opt("--script");
const logPath = opt("--log");
const defaultText = opt("--default-text", "ok");
let turns = [];
if (scriptPath) {
	const parsed = JSON.parse(readFileSync(scriptPath, "utf8"));
	turns = Array.isArray(parsed) ? parsed : parsed.turns || [];
}
let nextTurn = 0;
let requestNo = 0;
const log = (rec) => {
	if (logPath) appendFileSync(logPath, `${JSON.stringify(rec)}\n`);
};
const ev = (type, data) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;

function handle(req, res, raw) {
	const n = ++requestNo;
	let body = {};
	try {
		body = JSON.parse(raw);
	} catch {}
	const hasTools = Array.isArray(body.tools) && body.tools.length > 0;
	const turnIndex = hasTools && nextTurn < turns.length ? nextTurn++ : null;
	const turn = turnIndex === null ? { text: defaultText } : turns[turnIndex];
	log({ n, method: req.method, path: req.url, turn: turnIndex, model: body.model, tools: hasTools ? body.tools.length : 0 });

	const items = [];
	if (turn.reasoning) {
		items.push({ type: "reasoning", id: `rs_mock_${n}`, summary: [{ type: "summary_text", text: turn.reasoning }] });
	}
	if (turn.text) {
		items.push({
			type: "message", id: `msg_mock_${n}`, role: "assistant", status: "completed",
			content: [{ type: "output_text", text: turn.text, annotations: [] }],
		});
	}
	(turn.tool_calls || []).forEach((tc, i) => {
		items.push({
			type: "function_call", id: `fc_mock_${n}_${i}`, call_id: tc.id || `call_${n}_${i}`, name: tc.name, status: "completed",
			arguments: typeof tc.arguments === "string" ? tc.arguments : JSON.stringify(tc.arguments ?? {}),
		});
	});
	const u = turn.usage || {};
	const inTok = u.prompt_tokens ?? Math.max(1, Math.ceil(raw.length / 4));
	const outTok = u.completion_tokens ?? Math.max(1, Math.ceil(JSON.stringify(items).length / 4));
	const response = { id: `resp_mock_${n}`, object: "response", created_at: 1767225600, model: body.model || "mock-model", status: "in_progress", output: [] };
	res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
	let out = ev("response.created", { response });
	items.forEach((item, output_index) => {
		out += ev("response.output_item.added", { output_index, item });
		if (item.type === "message") {
			out += ev("response.output_text.delta", { output_index, item_id: item.id, content_index: 0, delta: item.content[0].text });
		}
		out += ev("response.output_item.done", { output_index, item });
	});
	out += ev("response.completed", {
		response: {
			...response, status: "completed", output: items,
			usage: { input_tokens: inTok, input_tokens_details: { cached_tokens: 0 }, output_tokens: outTok, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: inTok + outTok },
		},
	});
	res.end(out);
}

const server = createServer((req, res) => {
	const chunks = [];
	req.on("data", (c) => chunks.push(c));
	req.on("error", () => {});
	req.on("end", () => {
		const raw = Buffer.concat(chunks).toString("utf8");
		const path = (req.url || "").split("?")[0];
		if (req.method === "POST" && /\/responses$/.test(path)) return handle(req, res, raw);
		if (req.method === "GET" && path === "/health") {
			res.writeHead(200, { "content-type": "text/plain" });
			return res.end("ok\n");
		}
		log({ n: ++requestNo, method: req.method, path: req.url, turn: null, unhandled: true });
		res.writeHead(404, { "content-type": "application/json" });
		res.end(JSON.stringify({ error: { message: `mock-responses: no route ${req.method} ${path}`, type: "not_found" } }));
	});
});
server.listen(port, "127.0.0.1", () => process.stdout.write(`PORT=${server.address().port}\n`));
const stop = () => {
	server.close(() => process.exit(0));
	server.closeAllConnections?.();
	setTimeout(() => process.exit(0), 500).unref();
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
