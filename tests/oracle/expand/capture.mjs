#!/usr/bin/env node
// Captures pi 1.6.0's user-input expansion (/template args, /skill:name args) and its stored
// `skills` system-prompt section, black box: for every case a scratch project gets the case's
// `.pi/prompts/*.md` and `.pi/skills/<dir>/SKILL.md` files, pi runs `-a -p <input>` against the
// loopback mock LLM, and the user message / system section it sent are recorded.
//
// Usage (see capture.sh, which sets the environment):
//   node capture.mjs --in cases.in.json --out cases.json --pi "<node> <cli.js>" --mock mock-llm.mjs
//
// Input: {"expand": [case...], "sections": [case...]}
//   expand case:  {"name", "input", "kind", "templates"?: {name: text},
//                  "skills"?: [{"dir", "text", "name"?}], "note"?}
//                 (`kind` and a skill's `name` are our annotations for the Rust test: what should
//                 match, and the name pi loads the skill under; no `name` = pi does not load it)
//   section case: {"name", "tools", "skills": [{"dir", "text", "name", "description",
//                  "disableModelInvocation"}], "note"?}
// Output: the same cases plus `expected` (the first user message pi stored in the session,
// cross-checked against the request) or `expectedSection` (the stored `skills` section, or
// `null` when absent). The scratch project's absolute path is replaced by `<ROOT>` so the
// fixture is machine independent.
import { spawnSync, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { tmpdir } from "node:os";

const argv = process.argv.slice(2);
const opt = (n) => {
	const i = argv.indexOf(n);
	if (i < 0 || i + 1 >= argv.length) throw new Error(`missing ${n}`);
	return argv[i + 1];
};
const spec = JSON.parse(readFileSync(opt("--in"), "utf8"));
const outPath = opt("--out");
const piCmd = opt("--pi").split(" ");
const mockPath = opt("--mock");

const work = mkdtempSync(join(tmpdir(), "pi-expand-capture."));
const agent = join(work, "agent");
const logPath = join(work, "requests.jsonl");
mkdirSync(agent, { recursive: true });

const mock = spawn(piCmd[0], [mockPath, "--log", logPath, "--port", "0"], { stdio: ["ignore", "pipe", "inherit"] });
process.on("exit", () => mock.kill("SIGTERM"));
const port = await new Promise((resolve, reject) => {
	let buf = "";
	mock.stdout.on("data", (d) => {
		buf += d;
		const m = buf.match(/PORT=(\d+)/);
		if (m) resolve(Number(m[1]));
	});
	mock.on("exit", () => reject(new Error("mock exited")));
});
writeFileSync(
	join(agent, "models.json"),
	JSON.stringify({
		providers: {
			mock: {
				baseUrl: `http://127.0.0.1:${port}/v1`,
				api: "openai-completions",
				apiKey: "test",
				models: [
					{
						id: "mock-model",
						name: "Mock Model",
						reasoning: false,
						input: ["text"],
						cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
						contextWindow: 128000,
						maxTokens: 4096,
					},
				],
			},
		},
	}),
);
writeFileSync(join(agent, "settings.json"), JSON.stringify({ defaultProvider: "mock", defaultModel: "mock-model" }));

const logLines = () => (existsSync(logPath) ? readFileSync(logPath, "utf8").split("\n").filter(Boolean) : []);

// Runs pi in a fresh project made from the case's files; returns {requests, sessionFile, root, stderr}.
function runCase(name, files, args) {
	const root = join(work, "proj", name);
	rmSync(root, { recursive: true, force: true });
	for (const [rel, text] of Object.entries(files)) {
		const p = join(root, rel);
		mkdirSync(join(p, ".."), { recursive: true });
		writeFileSync(p, text);
	}
	mkdirSync(root, { recursive: true });
	const sessions = join(work, "sessions", name);
	const before = logLines().length;
	const r = spawnSync(piCmd[0], [...piCmd.slice(1), "-a", "--session-dir", sessions, ...args], {
		cwd: root,
		env: { ...process.env, PI_CODING_AGENT_DIR: agent, PI_OFFLINE: "1", NO_COLOR: "1" },
		stdio: ["ignore", "pipe", "pipe"],
		encoding: "utf8",
		timeout: 60000,
	});
	if (r.error) throw r.error;
	const requests = logLines()
		.slice(before)
		.map((l) => JSON.parse(l).body);
	let sessionFile = null;
	if (existsSync(sessions)) {
		const f = readdirSync(sessions).filter((x) => x.endsWith(".jsonl"));
		if (f.length === 1) sessionFile = join(sessions, f[0]);
	}
	return { requests, sessionFile, root, status: r.status, stderr: r.stderr };
}

const unroot = (s, root) => (typeof s === "string" ? s.split(root).join("<ROOT>") : s);
const partsText = (c) => (typeof c === "string" ? c : c.filter((p) => p.type === "text").map((p) => p.text).join(""));
// The first user message pi stored in the session (the request drops an empty one).
const storedUserText = (sessionFile) => {
	if (!sessionFile) return null;
	for (const line of readFileSync(sessionFile, "utf8").split("\n").filter(Boolean)) {
		const e = JSON.parse(line);
		if (e.type === "message" && e.message.role === "user") return partsText(e.message.content);
	}
	return null;
};
const sentUserText = (body) => {
	const msgs = body.messages.filter((m) => m.role === "user");
	return msgs.length ? partsText(msgs[msgs.length - 1].content) : null;
};

const out = { pi: "1.6.0", generatedBy: "tests/oracle/expand/capture.sh", expand: [], sections: [] };
for (const c of spec.expand) {
	const files = {};
	for (const [n, t] of Object.entries(c.templates || {})) files[`.pi/prompts/${n}.md`] = t;
	for (const s of c.skills || []) files[`.pi/skills/${s.dir}/SKILL.md`] = s.text;
	const r = runCase(c.name, files, ["-p", c.input]);
	const stored = storedUserText(r.sessionFile);
	const sent = r.requests.length ? sentUserText(r.requests[0]) : null;
	if (stored === null) process.stderr.write(`capture: ${c.name}: no stored user message (exit ${r.status}) ${r.stderr.slice(0, 300)}\n`);
	if (sent !== stored && !(sent === null && stored === "")) {
		process.stderr.write(`capture: ${c.name}: sent user text differs from the stored one: ${JSON.stringify(sent)}\n`);
	}
	const expected = unroot(stored, r.root);
	out.expand.push({ ...c, expected });
	process.stderr.write(`capture: ${c.name}: ${JSON.stringify(expected)}\n`);
}
for (const c of spec.sections) {
	const files = {};
	for (const s of c.skills) files[`.pi/skills/${s.dir}/SKILL.md`] = s.text;
	const r = runCase(`section-${c.name}`, files, ["--tools", c.tools, "-p", "hello"]);
	let section = null;
	if (r.sessionFile) {
		for (const line of readFileSync(r.sessionFile, "utf8").split("\n").filter(Boolean)) {
			const e = JSON.parse(line);
			if (e.type === "message" && e.message.role === "system" && e.message.sections && "skills" in e.message.sections) {
				section = e.message.sections.skills;
			}
		}
	} else {
		process.stderr.write(`capture: section ${c.name}: no session file (exit ${r.status}) ${r.stderr.slice(0, 300)}\n`);
	}
	// Cross-check: the section is also in the system prompt pi sent.
	const sys = r.requests.length ? r.requests[0].messages.find((m) => m.role === "system") : null;
	if (section !== null && sys && !sys.content.includes(section)) {
		process.stderr.write(`capture: section ${c.name}: stored section not found in the sent prompt\n`);
	}
	out.sections.push({ ...c, expectedSection: unroot(section, r.root) });
	process.stderr.write(`capture: section ${c.name}: ${section === null ? "none" : `${section.length} chars`}\n`);
}

mock.kill("SIGTERM");
rmSync(work, { recursive: true, force: true });
writeFileSync(outPath, `${JSON.stringify(out, null, 2)}\n`);
process.stderr.write(`capture: wrote ${out.expand.length} expansion and ${out.sections.length} section cases to ${outPath}\n`);
