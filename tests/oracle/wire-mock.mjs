#!/usr/bin/env node
// A loopback HTTP server that answers any POST with scripted raw replies and
// logs every request (path, headers, parsed body). Wire-API agnostic: the
// reply body is sent byte for byte, so it can be an OpenAI, Anthropic,
// Responses or Gemini event stream, a broken one, or an error answer. Used by
// probe-providers.sh to observe how pi 1.6.0 treats faults and what bodies it
// sends.
//
// Usage:
//   node wire-mock.mjs --script replies.json --log requests.jsonl [--port 0]
// Prints `PORT=<n>` as the first stdout line once listening. SIGTERM stops it.
//
// replies.json: a JSON array, one reply per request in order; the last one
// repeats. A reply:
//   {"status": 200, "headers": {"retry-after": "1"},   // default 200, text/event-stream
//    "body": "raw text",                                // sent as is
//    "drop": true,                                      // close the socket without ending the chunked body
//    "stall": true}                                     // send the body, then keep the response open
import { createServer } from "node:http";
import { appendFileSync, readFileSync } from "node:fs";

const args = process.argv.slice(2);
const opt = (name, def) => {
	const i = args.indexOf(name);
	return i >= 0 && i + 1 < args.length ? args[i + 1] : def;
};
const replies = JSON.parse(readFileSync(opt("--script"), "utf8"));
const logPath = opt("--log");
let n = 0;

const server = createServer((req, res) => {
	const chunks = [];
	req.on("data", (c) => chunks.push(c));
	req.on("end", () => {
		const raw = Buffer.concat(chunks).toString("utf8");
		let body = raw;
		try {
			body = JSON.parse(raw);
		} catch {}
		const reply = replies[Math.min(n, replies.length - 1)] || { body: "" };
		n += 1;
		if (logPath) {
			appendFileSync(logPath, `${JSON.stringify({ n, method: req.method, path: req.url, headers: req.headers, body })}\n`);
		}
		const headers = { "content-type": "text/event-stream", ...(reply.headers || {}) };
		res.writeHead(reply.status || 200, headers);
		if (reply.stall) {
			res.write(reply.body || "");
			return;
		}
		if (reply.drop) {
			res.write(reply.body || "");
			setTimeout(() => res.socket && res.socket.destroy(), 20);
			return;
		}
		res.end(reply.body || "");
	});
});
server.listen(Number(opt("--port", "0")), "127.0.0.1", () => {
	process.stdout.write(`PORT=${server.address().port}\n`);
});
for (const s of ["SIGTERM", "SIGINT"]) process.on(s, () => process.exit(0));
