#!/usr/bin/env node
// Drive `pi --mode rpc` with a fixed list of commands, one at a time.
//
//   node rpc-drive.mjs --events events.jsonl [--timeout-ms 30000] -- <pi command...> --mode rpc [pi args]
//   (commands: a JSON array on stdin, e.g. [{"type":"prompt","message":"hi"},{"type":"compact"}])
//
// For each command an id is assigned ("c1", "c2", ...), the command is written to pi's
// stdin, and the driver waits for the matching response; for a `prompt` whose response
// says disposition "started" it also waits for the next `agent_settled` event. Every
// line pi writes to stdout is appended to --events. Prints the responses as a JSON array
// on stdout. Exits 1 if a response has success:false, a timeout hits, or pi dies early.
import { spawn } from "node:child_process";
import { appendFileSync, readFileSync } from "node:fs";

const argv = process.argv.slice(2);
const dd = argv.indexOf("--");
if (dd < 0) {
	console.error("usage: rpc-drive.mjs [--events F] [--timeout-ms N] -- <cmd...>  (commands JSON on stdin)");
	process.exit(2);
}
const own = argv.slice(0, dd);
const cmd = argv.slice(dd + 1);
const opt = (n, d) => (own.indexOf(n) >= 0 ? own[own.indexOf(n) + 1] : d);
const eventsPath = opt("--events");
const timeoutMs = Number(opt("--timeout-ms", "30000"));
const commands = JSON.parse(readFileSync(0, "utf8"));

const child = spawn(cmd[0], cmd.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
let buf = "";
const waiters = [];
let exited = false;
child.on("exit", (code, sig) => {
	exited = true;
	for (const w of waiters.splice(0)) w.reject(new Error(`pi exited early (code ${code}, signal ${sig})`));
});
child.stdout.on("data", (d) => {
	buf += d.toString("utf8");
	let i;
	while ((i = buf.indexOf("\n")) >= 0) {
		const line = buf.slice(0, i).replace(/\r$/, "");
		buf = buf.slice(i + 1);
		if (!line.trim()) continue;
		if (eventsPath) appendFileSync(eventsPath, `${line}\n`);
		let msg;
		try {
			msg = JSON.parse(line);
		} catch {
			continue;
		}
		for (const w of [...waiters]) {
			if (w.match(msg)) {
				waiters.splice(waiters.indexOf(w), 1);
				w.resolve(msg);
			}
		}
	}
});

function waitFor(match, what) {
	return new Promise((resolve, reject) => {
		if (exited) return reject(new Error("pi already exited"));
		const w = { match, resolve, reject };
		waiters.push(w);
		setTimeout(() => {
			const k = waiters.indexOf(w);
			if (k >= 0) {
				waiters.splice(k, 1);
				reject(new Error(`timeout waiting for ${what}`));
			}
		}, timeoutMs).unref();
	});
}

const responses = [];
let failed = false;
try {
	let n = 0;
	for (const c of commands) {
		const id = `c${++n}`;
		const settled = c.type === "prompt" ? waitFor((m) => m.type === "agent_settled", "agent_settled") : null;
		settled?.catch(() => {});
		const resp = waitFor((m) => m.type === "response" && m.id === id, `response to ${id}`);
		child.stdin.write(`${JSON.stringify({ ...c, id })}\n`);
		const r = await resp;
		responses.push(r);
		if (!r.success) {
			failed = true;
			break;
		}
		if (settled && r.data?.disposition === "started") await settled;
	}
} catch (e) {
	console.error(`rpc-drive: ${e.message}`);
	failed = true;
}
child.stdin.end();
const killer = setTimeout(() => child.kill("SIGTERM"), 5000);
killer.unref();
if (!exited) await new Promise((r) => child.on("exit", r));
clearTimeout(killer);
process.stdout.write(`${JSON.stringify(responses, null, 1)}\n`);
process.exit(failed ? 1 : 0);
