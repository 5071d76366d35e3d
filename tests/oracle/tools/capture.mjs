#!/usr/bin/env node
// Runs every case of cases.json through the real pi 1.6.0 (one `pi --mode json` run per
// case against the loopback mock LLM, which replays exactly one tool call) and writes what
// pi's tool returned to expected.json: {name: {content, isError, details}}.
//
// Usage: node capture.mjs <cases.json> <expected.json> [--only name,name] [--prompt out.json]
// Env: PI160 (word-split command), NODE22, PI_TOOLS_BIN (dir with rg and fd, becomes AGENT_DIR/bin).
// "$CWD" in a case's args becomes the case's working directory.
// Paths that depend on the machine are replaced in both content and details:
//   the case's working directory  -> $CWD
//   bash's full-output temp file  -> $BASHLOG
// --definitions out.json writes pi's tool definitions and prompt sections instead of running cases.
// --prompt writes the tool definitions and system prompt pi sent (for the prompt snippets).
import { spawn } from "node:child_process";
import { mkdirSync, writeFileSync, readFileSync, mkdtempSync, rmSync, symlinkSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname, resolve } from "node:path";

const here = dirname(new URL(import.meta.url).pathname);
const mockPath = resolve(here, "../mock-llm.mjs");
const argv = process.argv.slice(2);
const casesPath = argv[0];
const outPath = argv[1];
const onlyIdx = argv.indexOf("--only");
const only = onlyIdx >= 0 ? new Set(argv[onlyIdx + 1].split(",")) : null;
const promptIdx = argv.indexOf("--prompt");
const promptOut = promptIdx >= 0 ? argv[promptIdx + 1] : null;
const defsIdx = argv.indexOf("--definitions");
const defsOut = defsIdx >= 0 ? argv[defsIdx + 1] : null;
const node = process.env.NODE22;
const piCmd = process.env.PI160.split(" ");

/** The file contents a setup spec describes (the Rust test mirrors this). */
export function genContent(spec) {
	if (typeof spec === "string") return Buffer.from(spec, "utf8");
	if (spec.base64 !== undefined) return Buffer.from(spec.base64, "base64");
	if (spec.gen === "lines") {
		// count lines "text" with {n} = 1-based line number, each ending in "\n"
		let s = "";
		for (let n = 1; n <= spec.count; n++) s += spec.text.replaceAll("{n}", String(n)) + "\n";
		return Buffer.from(s, "utf8");
	}
	if (spec.gen === "repeat") return Buffer.from(spec.text.repeat(spec.count), "utf8");
	throw new Error(`unknown file spec ${JSON.stringify(spec)}`);
}

function setup(dir, s = {}) {
	for (const d of s.dirs || []) mkdirSync(join(dir, d), { recursive: true });
	for (const [rel, spec] of Object.entries(s.files || {})) {
		const p = join(dir, rel);
		mkdirSync(dirname(p), { recursive: true });
		writeFileSync(p, genContent(spec));
	}
}

function startMock(script, log) {
	return new Promise((res, rej) => {
		const p = spawn(node, [mockPath, "--script", script, "--log", log, "--port", "0"], { stdio: ["ignore", "pipe", "inherit"] });
		let buf = "";
		p.stdout.on("data", (d) => {
			buf += d;
			const m = buf.match(/PORT=(\d+)/);
			if (m) res({ proc: p, port: Number(m[1]) });
		});
		p.on("error", rej);
	});
}

function writeAgentDir(dir, port) {
	mkdirSync(dir, { recursive: true });
	writeFileSync(join(dir, "models.json"), JSON.stringify({
		providers: { mock: { baseUrl: `http://127.0.0.1:${port}/v1`, api: "openai-completions", apiKey: "test",
			models: [{ id: "mock-model", name: "Mock Model", reasoning: false, input: ["text", "image"],
				cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }, contextWindow: 128000, maxTokens: 4096 }] } },
	}));
	writeFileSync(join(dir, "settings.json"), JSON.stringify({ defaultProvider: "mock", defaultModel: "mock-model" }));
	if (process.env.PI_TOOLS_BIN) {
		const bin = join(dir, "bin");
		if (!existsSync(bin)) symlinkSync(process.env.PI_TOOLS_BIN, bin);
	}
}

function run(cmd, args, opts) {
	return new Promise((res) => {
		const p = spawn(cmd, args, { ...opts, stdio: ["ignore", "pipe", "pipe"] });
		let out = "", err = "";
		p.stdout.on("data", (d) => (out += d));
		p.stderr.on("data", (d) => (err += d));
		p.on("close", (code) => res({ code, out, err }));
	});
}

function normalise(v, cwd) {
	let s = JSON.stringify(v);
	s = s.split(JSON.stringify(cwd).slice(1, -1)).join("$CWD");
	s = s.replace(/\/[^"\s\]]*?\/pi-bash-[0-9a-f]{16}\.log/g, "$BASHLOG");
	return JSON.parse(s);
}

async function runCase(c) {
	const root = mkdtempSync(join(tmpdir(), "pi-tools-case-"));
	const cwd = join(root, "cwd");
	mkdirSync(cwd);
	setup(cwd, c.setup);
	const script = join(root, "turns.json");
	writeFileSync(script, JSON.stringify([{ tool_calls: [{ name: c.tool, arguments: JSON.parse(JSON.stringify(c.args).split("$CWD").join(cwd)) }] }, { text: "done" }]));
	const log = join(root, "req.jsonl");
	const { proc, port } = await startMock(script, log);
	const agent = join(root, "agent");
	writeAgentDir(agent, port);
	const tools = c.tools || "read,bash,edit,write,grep,find,ls";
	const r = await run(piCmd[0], [...piCmd.slice(1), "--mode", "json", "--tools", tools, "go"], {
		cwd, env: { ...process.env, PI_OFFLINE: "1", PI_CODING_AGENT_DIR: agent },
	});
	proc.kill("SIGTERM");
	const ends = r.out.split("\n").filter(Boolean).map((l) => JSON.parse(l)).filter((e) => e.type === "tool_execution_end");
	if (ends.length !== 1) throw new Error(`${c.name}: expected one tool_execution_end, got ${ends.length}\n${r.err}`);
	const e = ends[0];
	const res = { content: normalise(e.result.content, cwd), isError: e.isError };
	if (e.result.details !== undefined) res.details = normalise(e.result.details, cwd);
	// files the case asks to see afterwards (write/edit results on disk)
	if (c.check) {
		res.files = {};
		for (const rel of c.check) {
			try { res.files[rel] = readFileSync(join(cwd, rel)).toString("base64"); } catch { res.files[rel] = null; }
		}
	}
	let prompt = null;
	if (promptOut || defsOut) {
		const req = JSON.parse(readFileSync(log, "utf8").split("\n")[0]);
		prompt = { tools: req.body.tools, messages: req.body.messages.filter((m) => m.role === "system" || m.role === "developer") };
	}
	rmSync(root, { recursive: true, force: true });
	return { res, prompt };
}

if (defsOut) {
	// the tool definitions and the system prompt's <tools>/<rules> sections with all seven tools
	const { prompt } = await runCase({ name: "definitions", tool: "ls", args: {} });
	const sys = prompt.messages.map((m) => (typeof m.content === "string" ? m.content : m.content.map((b) => b.text).join(""))).join("\n");
	const section = (tag) => sys.slice(sys.indexOf(`<${tag}>`), sys.indexOf(`</${tag}>`) + tag.length + 3);
	writeFileSync(defsOut, JSON.stringify({ tools: prompt.tools.map((t) => t.function), toolsSection: section("tools"), rulesSection: section("rules") }, null, 2) + "\n");
	process.exit(0);
}
const cases = JSON.parse(readFileSync(casesPath, "utf8")).cases.filter((c) => !only || only.has(c.name));
let expected = {};
if (only && existsSync(outPath)) expected = JSON.parse(readFileSync(outPath, "utf8"));
const prompts = {};
const queue = [...cases];
async function worker() {
	while (queue.length) {
		const c = queue.shift();
		const { res, prompt } = await runCase(c);
		expected[c.name] = res;
		if (prompt) prompts[c.name] = prompt;
		process.stderr.write(`capture: ${c.name} ${res.isError ? "(error)" : ""}\n`);
	}
}
await Promise.all(Array.from({ length: Number(process.env.JOBS || 6) }, worker));
const sorted = {};
for (const c of JSON.parse(readFileSync(casesPath, "utf8")).cases) if (expected[c.name]) sorted[c.name] = expected[c.name];
writeFileSync(outPath, JSON.stringify(sorted, null, 2) + "\n");
if (promptOut) writeFileSync(promptOut, JSON.stringify(prompts, null, 2) + "\n");
