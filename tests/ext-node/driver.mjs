// Plays the toolkit's side of pi-ext/1 against the Node host (lib/src/extensions/node-host/
// host.mjs), for the tests: spawns `node host.mjs`, sends `hello`, collects `register`, sends
// requests and awaits their `result` (collecting `update`s), and answers the host's `call`s with
// a responder the test supplies (default: every call recorded and answered `null`).
import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";

const HERE = dirname(fileURLToPath(import.meta.url));
export const ROOT = join(HERE, "..", "..");
export const HOST = join(ROOT, "lib", "src", "extensions", "node-host", "host.mjs");

export class HostDriver {
	constructor({ node = process.execPath, cwd = process.cwd(), env = process.env, onCall } = {}) {
		this.child = spawn(node, [HOST], { cwd, env, stdio: ["pipe", "pipe", "pipe"] });
		this.stderr = "";
		this.records = []; // every record from the host, in order
		this.calls = []; // every call, in order
		this.nonJson = []; // stdout lines that were not JSON (must stay empty)
		this.onCall = onCall ?? (() => null);
		this.nextId = 1;
		this.waiting = new Map();
		this.waiters = [];
		this.exited = new Promise((resolve) => this.child.on("exit", (code, signal) => resolve({ code, signal })));
		this.child.stderr.on("data", (d) => (this.stderr += d));
		createInterface({ input: this.child.stdout }).on("line", (line) => this.#line(line));
	}
	#line(line) {
		let rec;
		try {
			rec = JSON.parse(line);
		} catch {
			this.nonJson.push(line);
			return;
		}
		this.records.push(rec);
		if (rec.type === "call") {
			this.calls.push(rec);
			Promise.resolve()
				.then(() => this.onCall(rec))
				.then(
					(result) => this.send({ type: "return", id: rec.id, result: result ?? null }),
					(e) => this.send({ type: "return", id: rec.id, error: String(e && e.message ? e.message : e) }),
				);
		} else if ((rec.type === "result" || rec.type === "update") && this.waiting.has(rec.id)) {
			const w = this.waiting.get(rec.id);
			if (rec.type === "update") w.updates.push(rec.partialResult);
			else {
				this.waiting.delete(rec.id);
				w.resolve({ ...rec, updates: w.updates });
			}
		}
		for (const w of [...this.waiters]) {
			if (w.pred(rec)) {
				this.waiters.splice(this.waiters.indexOf(w), 1);
				w.resolve(rec);
			}
		}
	}
	send(rec) {
		this.child.stdin.write(`${JSON.stringify(rec)}\n`);
	}
	sendRaw(line) {
		this.child.stdin.write(line);
	}
	/** The next record from the host matching `pred` (already received ones included). */
	waitFor(pred, ms = 20000) {
		const have = this.records.find(pred);
		if (have) return Promise.resolve(have);
		return new Promise((resolve, reject) => {
			const w = { pred, resolve };
			this.waiters.push(w);
			setTimeout(() => reject(new Error(`timed out waiting for a record; stderr:\n${this.stderr}`)), ms).unref();
		});
	}
	async hello(load, extra = {}) {
		this.send({
			type: "hello", protocol: 1, host: "pi-toolkit", hostVersion: "0.1.0", cwd: extra.cwd ?? process.cwd(), mode: "print", hasUI: false,
			pass: "full", agentDir: join(ROOT, "target", "no-agent-dir"), sessionFile: null, sessionId: "test-session", projectTrusted: true,
			load: load.map((path) => (typeof path === "string" ? { path, source: "cli", scope: "temporary" } : path)),
			settings: {},
			...extra,
		});
		return this.waitFor((r) => r.type === "register", extra.timeoutMs ?? 30000);
	}
	/** Sends a request (`event`, `execute`, `command`) with a fresh id; resolves with its result record. */
	request(rec) {
		const id = this.nextId++;
		return new Promise((resolve) => {
			this.waiting.set(id, { resolve, updates: [] });
			this.send({ ctx: {}, ...rec, id });
		});
	}
	event(ext, event, ctx = {}) {
		return this.request({ type: "event", ext, event, ctx });
	}
	async close() {
		this.child.stdin.end();
		const t = setTimeout(() => this.child.kill("SIGKILL"), 5000);
		const r = await this.exited;
		clearTimeout(t);
		return r;
	}
}
