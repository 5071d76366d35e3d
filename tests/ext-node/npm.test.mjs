// Real extensions from the npm registry (installed, pinned, by tests/ext-node/install.sh) and the
// fixture extension load under the toolkit's Node host and register the same tools (names and
// parameter schemas, as the model is offered them) and commands as under pi 1.6.0 (the oracle,
// tests/oracle/install.sh). SKIPs when either is missing; fails then under CI=true.
import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { compareAll, haveOracle, havePackages, markdown, piRegistrations, hostRegistrations, PACKAGES } from "./compare-npm.mjs";
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
