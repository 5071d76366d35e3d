// Real extensions from the npm registry (installed, pinned, by tests/ext-node/install.sh) and the
// fixture extension load under the toolkit's Node host and register the same tools (names and
// parameter schemas, as the model is offered them) and commands as under pi 1.6.0 (the oracle,
// tests/oracle/install.sh). SKIPs when either is missing; fails then under CI=true.
import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { compareAll, haveOracle, havePackages, markdown, piRegistrations, hostRegistrations, PACKAGES, NODE22, PI_CLI } from "./compare-npm.mjs";
import { ROOT } from "./driver.mjs";

function needs(t) {
	if (haveOracle() && havePackages()) return true;
	const why = !haveOracle() ? "the pi oracle (bash tests/oracle/install.sh)" : "the npm extensions (bash tests/ext-node/install.sh)";
	if (process.env.CI === "true") assert.fail(`missing ${why}`);
	t.skip(`SKIP: needs ${why}`);
	return false;
}

test("four real npm extensions register the same tools and commands under the Node host as under pi 1.6.0", { timeout: 600000 }, async (t) => {
	if (!needs(t)) return;
	const rows = await compareAll();
	t.diagnostic(`\n${markdown(rows)}`);
	assert.equal(rows.length, PACKAGES.length);
	for (const r of rows) {
		assert.deepEqual(r.errors, [], `${r.package} failed to load`);
		assert.ok(r.piTools.length > 0 && r.piCommands.length > 0, `${r.package}: pi registered nothing?`);
		assert.deepEqual(r.hostTools, r.piTools, `${r.package} tools`);
		assert.deepEqual(r.hostCommands, r.piCommands, `${r.package} commands`);
		assert.deepEqual(r.schemaDiff, [], `${r.package} tool schemas`);
		assert.deepEqual(r.descriptionDiff, [], `${r.package} tool descriptions`);
		assert.ok(r.stdoutClean, `${r.package} wrote to stdout`);
	}
});

test("the fixture extension: same tool schema and command under the host as under pi 1.6.0", { timeout: 120000 }, async (t) => {
	if (!haveOracle()) {
		if (process.env.CI === "true") assert.fail("missing the pi oracle");
		t.skip("SKIP: needs the pi oracle (bash tests/oracle/install.sh)");
		return;
	}
	const fixture = join(ROOT, "tests", "ext-node", "fixtures", "gate-ext", "index.ts");
	const base = await piRegistrations(null);
	const pi = await piRegistrations(fixture);
	const host = await hostRegistrations(fixture);
	const ext = host.register.extensions[0];
	assert.deepEqual(pi.tools.filter((n) => !base.tools.includes(n)), ["greet"]);
	assert.deepEqual(ext.tools[0].parameters, pi.toolSchemas.greet);
	assert.deepEqual(
		pi.commands.filter((c) => c.source === "extension" && c.sourceInfo?.path === fixture).map((c) => [c.name, c.description]),
		ext.commands.map((c) => [c.name, c.description]),
	);
});

test("the API an extension sees has pi 1.6.0's shape: pi.*, ctx.*, ctx.ui.*, sessionManager reads, no-UI answers", { timeout: 120000 }, async (t) => {
	if (!haveOracle()) {
		if (process.env.CI === "true") assert.fail("missing the pi oracle");
		t.skip("SKIP: needs the pi oracle (bash tests/oracle/install.sh)");
		return;
	}
	const { mkdtempSync, readFileSync, rmSync } = await import("node:fs");
	const { tmpdir } = await import("node:os");
	const probe = join(ROOT, "tests", "ext-node", "fixtures", "surface.ts");
	const dir = mkdtempSync(join(tmpdir(), "pi-ext-surface-"));
	t.after(() => rmSync(dir, { recursive: true, force: true }));
	const saved = process.env.PROBE_OUT;
	try {
		// pi in print mode (no UI, like the host's hello here); its model request fails at once
		// (nothing listens on port 9), session_start has run by then
		const { spawnSync } = await import("node:child_process");
		const { mkdirSync, writeFileSync } = await import("node:fs");
		const agent = join(dir, "agent");
		mkdirSync(agent);
		writeFileSync(join(agent, "models.json"), JSON.stringify({ providers: { mock: { baseUrl: "http://127.0.0.1:9/v1", api: "openai-completions", apiKey: "test", models: [{ id: "mock-model", name: "M", reasoning: false, input: ["text"], cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }, contextWindow: 128000, maxTokens: 4096 }] } } }));
		writeFileSync(join(agent, "settings.json"), JSON.stringify({ defaultProvider: "mock", defaultModel: "mock-model" }));
		spawnSync(NODE22, [PI_CLI, "-e", probe, "--no-session", "-p", "hi"], {
			cwd: dir, input: "", timeout: 60000,
			env: { ...process.env, PI_CODING_AGENT_DIR: agent, PI_OFFLINE: "1", PROBE_OUT: join(dir, "pi.json") },
		});
		process.env.PROBE_OUT = join(dir, "host.json");
		await hostRegistrations(probe);
	} finally {
		if (saved === undefined) delete process.env.PROBE_OUT;
		else process.env.PROBE_OUT = saved;
	}
	const pi = JSON.parse(readFileSync(join(dir, "pi.json"), "utf8"));
	const host = JSON.parse(readFileSync(join(dir, "host.json"), "utf8"));
	assert.deepEqual(host.piKeys, pi.piKeys);
	assert.deepEqual(host.eventsKeys, pi.eventsKeys);
	assert.deepEqual(host.ctxKeys, pi.ctxKeys);
	assert.deepEqual(host.uiKeys, pi.uiKeys);
	// the host gives the read side of the session manager (no appends, no branching)
	const reads = ["getCwd", "getSessionId", "getSessionFile", "getSessionDir", "isPersisted", "getSessionName", "getHeader", "getEntries", "getEntryCount", "getEntry", "getLeafId", "getLeafEntry", "getChildren", "getBranch", "getLabel", "getTree"];
	for (const m of reads) assert.ok(pi.smMethods.includes(m), `pi has sessionManager.${m}`);
	assert.deepEqual(host.smMethods, [...reads].sort());
	for (const k of ["confirm", "select", "input", "setTheme", "flag"]) assert.deepEqual(host[k], pi[k], k);
	assert.deepEqual([host.mode, host.hasUI, host.thinking], [pi.mode, pi.hasUI, pi.thinking]);
});

test("pi 1.6.0's own example extensions load under the host, except those needing what the toolkit cannot give", { timeout: 120000 }, async (t) => {
	if (!haveOracle()) {
		if (process.env.CI === "true") assert.fail("missing the pi oracle");
		t.skip("SKIP: needs the pi oracle (bash tests/oracle/install.sh)");
		return;
	}
	const { readdirSync, existsSync } = await import("node:fs");
	const { dirname } = await import("node:path");
	const examples = join(dirname(dirname(dirname(PI_CLI))), "examples", "extensions");
	const load = readdirSync(examples, { withFileTypes: true })
		.filter((e) => (e.isFile() && e.name.endsWith(".ts")) || (e.isDirectory() && (existsSync(join(examples, e.name, "index.ts")) || existsSync(join(examples, e.name, "package.json")))))
		.map((e) => join(examples, e.name))
		.sort();
	assert.ok(load.length > 50, `only ${load.length} examples found in ${examples}`);
	const { HostDriver } = await import("./driver.mjs");
	const d = new HostDriver({ node: NODE22 });
	t.after(() => d.close());
	const reg = await d.hello(load, { timeoutMs: 60000 });
	const expected = {
		"custom-provider-anthropic": "Failed to load extension: pi-toolkit host: pi.registerProvider is not available",
		"custom-provider-gitlab-duo": "Failed to load extension: pi-toolkit host: pi.registerProvider is not available",
		"jev-router.ts": "Failed to load extension: pi-toolkit host: pi.registerVirtualModel is not available",
	};
	const errors = Object.fromEntries(reg.errors.map((e) => [e.path.slice(examples.length + 1), e.message]));
	// gondolin imports a package the examples folder does not ship
	if (errors.gondolin) assert.match(errors.gondolin, /^Failed to load extension: Cannot find package '@earendil-works\/gondolin'/);
	delete errors.gondolin;
	assert.deepEqual(errors, expected);
	assert.equal(reg.extensions.length, load.length - reg.errors.length);
	assert.deepEqual(d.nonJson, []);
});
