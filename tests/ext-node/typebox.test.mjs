// The host's own typebox (lib/src/extensions/node-host/modules/typebox.mjs) builds the same JSON
// Schema, key order included, as the typebox 1.x pi 1.6.0 ships (pi maps `typebox` and
// `@sinclair/typebox` to it): tool parameters reach the model byte-identical. Compared live
// against the oracle's copy; SKIPs without the oracle (fails under CI=true).
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { ROOT } from "./driver.mjs";

const REAL = join(process.env.PI_ORACLE_DIR ?? join(homedir(), ".cache", "pi-toolkit-oracle"), "v160", "node_modules", "typebox", "build", "index.mjs");
const OURS = join(ROOT, "lib", "src", "extensions", "node-host", "modules", "typebox.mjs");

const cases = (T) => ({
	object: T.Object({ a: T.String({ description: "x" }), b: T.Optional(T.Number({ minimum: 1 })), c: T.Array(T.Integer(), { maxItems: 3 }) }, { description: "top" }),
	literals: T.Union([T.Literal("x"), T.Literal(2), T.Literal(true)]),
	unionOptions: T.Union([T.String(), T.Number()], { description: "u" }),
	scalars: T.Object({ e: T.Boolean({ default: false }), g: T.Null(), h: T.Unknown(), i: T.Any(), u: T.Undefined(), n: T.Never() }),
	record: T.Record(T.String(), T.Number()),
	tuple: T.Tuple([T.String(), T.Number()]),
	strict: T.Object({ z: T.String() }, { additionalProperties: false }),
	partial: T.Partial(T.Object({ a: T.String(), b: T.Number() })),
	required: T.Required(T.Object({ a: T.Optional(T.String()) })),
	intersect: T.Intersect([T.Object({ a: T.String() }), T.Object({ b: T.String() })]),
	empty: T.Object({}),
	pick: T.Pick(T.Object({ a: T.String(), b: T.Number() }), ["a"]),
	omit: T.Omit(T.Object({ a: T.String(), b: T.Number() }), ["a"]),
	unsafe: T.Unsafe({ type: "string", enum: ["a"] }),
	enumArray: T.Enum(["p", "q"]),
	enumObject: T.Enum({ A: "a", B: "b" }),
	keyof: T.KeyOf(T.Object({ a: T.String(), b: T.Number() })),
	stringOptions: T.String({ minLength: 1, maxLength: 5, pattern: "^a", format: "uri" }),
	arrayOptions: T.Array(T.String(), { description: "d", minItems: 1 }),
	literalOptions: T.Literal("x", { description: "d" }),
	nested: T.Object({ list: T.Array(T.Object({ id: T.String(), tags: T.Optional(T.Array(T.String())) })), mode: T.Optional(T.Union([T.Literal("a"), T.Literal("b")])) }),
	readonlyOptional: T.Object({ r: T.Readonly(T.Optional(T.String())), o: T.Optional(T.Readonly(T.String())) }),
});

test("the host's Type.* builders serialize exactly like pi's typebox 1.x", async (t) => {
	if (!existsSync(REAL)) {
		if (process.env.CI === "true") assert.fail("missing the pi oracle (tests/oracle/install.sh)");
		t.skip("SKIP: needs the pi oracle (bash tests/oracle/install.sh)");
		return;
	}
	const real = await import(pathToFileURL(REAL).href);
	const ours = await import(pathToFileURL(OURS).href);
	const want = cases(real.Type);
	const got = cases(ours.Type);
	for (const k of Object.keys(want)) assert.equal(JSON.stringify(got[k]), JSON.stringify(want[k]), k);
});

test("Value.Check / Errors and Compile validate what the builders describe", async () => {
	const { Type, Value, Compile } = await import(pathToFileURL(OURS).href);
	const s = Type.Object({ name: Type.String({ minLength: 1 }), n: Type.Optional(Type.Integer({ minimum: 0 })), mode: Type.Union([Type.Literal("a"), Type.Literal("b")]) });
	assert.equal(Value.Check(s, { name: "x", mode: "a" }), true);
	assert.equal(Value.Check(s, { name: "x", n: 1.5, mode: "a" }), false);
	assert.equal(Value.Check(s, { name: "", mode: "a" }), false);
	assert.equal(Value.Check(s, { name: "x", mode: "c" }), false);
	assert.deepEqual(Value.Errors(s, { mode: "a" }).map((e) => e.path), ["/name"]);
	assert.equal(Compile(s).Check({ name: "y", mode: "b", n: 0 }), true);
});
