#!/usr/bin/env node
// The project-trust matrix, answered by the real pi 1.6.0 (black box).   Run with Node 22:
//
//   . tests/oracle/env.sh && $NODE22 tests/oracle/trust-matrix.mjs > tests/fixtures/trust/matrix.json
//
// Every cell is built from scratch in its own temp root ($ROOT, realpath'd):
//   $ROOT/home                   HOME (unless the cell says otherwise)
//   $ROOT/agent                  PI_CODING_AGENT_DIR: models.json -> the mock LLM, settings.json,
//                                trust.json, and extensions/probe.ts (see below)
//   $ROOT/work/parent/proj       the cwd pi runs in (`pi -p hi`, stdin /dev/null, PI_OFFLINE=1)
//
// How we learn pi's decision, without reading pi's code:
//   * probe.ts, a user-level extension, writes `ctx.isProjectTrusted()` at `session_start`
//     (documented in docs/extensions.md) and records whether `project_trust` reached it; on
//     request (cell.hook) it answers that event with yes/no and `remember`.
//   * cells with protected resources carry `.pi/APPEND_SYSTEM.md` holding a unique marker;
//     the marker reaching the system prompt the mock LLM receives is a second, independent
//     witness (`markerSeen`), and must agree with `trusted`.
//   * `storeAfter` is trust.json after the run, with $ROOT substituted, or null if absent.
//
// Output (stdout): {"pi": "1.6.0", "cells": [...]}. A cell:
//   name, axes ({protected, cli, store, default} for the 54 matrix cells; null for extras),
//   setup: {dirs: [rel], files: {rel: text}, symlinks?: {rel: targetRel}, storeText: text|null, globalSettings: {..},
//           projectSettings: {..}|null, home: rel, cli: "approve"|"no_approve"|"unset",
//           hook: null|{trusted: "yes"|"no", remember: bool}}
//   (rel paths are relative to $ROOT; the cwd is always work/parent/proj; storeText uses $ROOT)
//   expect: {trusted, markerSeen|null, hookCalled, storeAfter, exitCode}
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";

const NODE22 = process.env.NODE22 || process.execPath;
const SDK = process.env.PI160_SDK;
if (!SDK) {
	console.error("trust-matrix: source tests/oracle/env.sh first (PI160_SDK unset)");
	process.exit(2);
}
const PI = [join(SDK, "dist/bundle/cli.js")];
const HERE = dirname(new URL(import.meta.url).pathname);
const CWD_REL = "work/parent/proj";

const PROBE = `import { writeFileSync } from "node:fs";
export default function (pi: any) {
  pi.on("project_trust", async (_event: any, _ctx: any) => {
    const out = process.env.TRUST_PROBE_OUT;
    if (out) writeFileSync(out + ".hook", "called");
    const h = process.env.TRUST_PROBE_HOOK || "";
    if (h === "yes" || h === "no") return { trusted: h, remember: process.env.TRUST_PROBE_REMEMBER === "1" };
    return { trusted: "undecided" };
  });
  pi.on("session_start", async (_e: any, ctx: any) => {
    const out = process.env.TRUST_PROBE_OUT;
    if (out) writeFileSync(out, String(ctx.isProjectTrusted()));
  });
}
`;

// ---- the cells -------------------------------------------------------------------------------

const cells = [];
const CLI = ["approve", "no_approve", "unset"];
const STORES = {
	none: null,
	cwd_true: `{"$ROOT/${CWD_REL}": true}`,
	ancestor_false: `{"$ROOT/work/parent": false}`,
};
const DEFAULTS = ["ask", "always", "never"];
for (const prot of [false, true]) {
	for (const cli of CLI) {
		for (const [store, storeText] of Object.entries(STORES)) {
			for (const def of DEFAULTS) {
				const name = `${prot ? "protected" : "plain"}-${cli}-${store}-${def}`;
				cells.push({
					name,
					axes: { protected: prot, cli, store, default: def },
					setup: {
						// a bare .pi/ counts for nothing: the plain cells carry one on purpose
						dirs: [`${CWD_REL}/.pi`],
						files: prot ? { [`${CWD_REL}/.pi/APPEND_SYSTEM.md`]: `TRUSTPROBE-${name}\n` } : {},
						storeText,
						globalSettings: { defaultProjectTrust: def },
						projectSettings: null,
						home: "home",
						cli,
						hook: null,
					},
				});
			}
		}
	}
}

function extra(name, setup) {
	cells.push({
		name,
		axes: null,
		setup: {
			dirs: [`${CWD_REL}/.pi`],
			files: {},
			storeText: null,
			globalSettings: {},
			projectSettings: null,
			home: "home",
			cli: "unset",
			hook: null,
			...setup,
		},
	});
}
const marker = (n) => ({ [`${CWD_REL}/.pi/APPEND_SYSTEM.md`]: `TRUSTPROBE-${n}\n` });

// hooks: first yes/no wins, remember saves cwd -> decision, and pi's own write format
extra("hook-yes-session-only", {
	files: marker("hook-yes-session-only"),
	storeText: `{"$ROOT/work/parent": false}`,
	globalSettings: { defaultProjectTrust: "never" },
	hook: { trusted: "yes", remember: false },
});
extra("hook-no-remember", {
	files: marker("hook-no-remember"),
	storeText: `{"$ROOT/${CWD_REL}": true}`,
	globalSettings: { defaultProjectTrust: "always" },
	hook: { trusted: "no", remember: true },
});
extra("hook-yes-remember-rewrites-store", {
	files: marker("hook-yes-remember-rewrites-store"),
	storeText: `\uFEFF{"/zzz/other": true, "$ROOT/work/parent": false, "/aaa/nulled": null, "$ROOT/${CWD_REL}": null}`,
	hook: { trusted: "yes", remember: true },
});
extra("hook-remember-creates-store", {
	files: marker("hook-remember-creates-store"),
	hook: { trusted: "yes", remember: true },
});
extra("hook-not-asked-without-protected", {
	globalSettings: { defaultProjectTrust: "never" },
	hook: { trusted: "no", remember: true },
});
extra("hook-not-asked-with-cli-override", {
	files: marker("hook-not-asked-with-cli-override"),
	cli: "approve",
	hook: { trusted: "no", remember: true },
});
extra("hook-undecided-falls-through", {
	files: marker("hook-undecided-falls-through"),
	globalSettings: { defaultProjectTrust: "always" },
	hook: { trusted: "undecided", remember: true },
});
// defaultProjectTrust: global only; anything else means ask
extra("project-settings-default-ignored", {
	files: { ...marker("project-settings-default-ignored") },
	projectSettings: { defaultProjectTrust: "always" },
	globalSettings: { defaultProjectTrust: "ask" },
});
extra("default-bogus-value-is-ask", {
	files: marker("default-bogus-value-is-ask"),
	globalSettings: { defaultProjectTrust: "Always" },
});
extra("default-unset-is-ask", {
	files: marker("default-unset-is-ask"),
});
// which paths are protected
for (const p of ["settings.json", "mcp.json"]) {
	extra(`protected-by-${p}`, {
		files: { [`${CWD_REL}/.pi/${p}`]: "{}\n", ...marker(`protected-by-${p}`) },
		globalSettings: { defaultProjectTrust: "never" },
	});
}
for (const d of ["extensions", "skills", "prompts", "themes"]) {
	extra(`protected-by-${d}`, {
		dirs: [`${CWD_REL}/.pi/${d}`],
		globalSettings: { defaultProjectTrust: "never" },
	});
}
extra("protected-by-SYSTEM.md", {
	files: { [`${CWD_REL}/.pi/SYSTEM.md`]: "TRUSTPROBE-protected-by-SYSTEM.md\n" },
	globalSettings: { defaultProjectTrust: "never" },
});
extra("protected-by-cwd-agents-skills", {
	dirs: [`${CWD_REL}/.agents/skills`],
	globalSettings: { defaultProjectTrust: "never" },
});
extra("protected-by-ancestor-agents-skills", {
	dirs: [`work/.agents/skills`],
	globalSettings: { defaultProjectTrust: "never" },
});
extra("home-agents-skills-not-protected", {
	dirs: [`work/.agents/skills`],
	home: "work",
	globalSettings: { defaultProjectTrust: "never" },
});
extra("home-via-symlink-agents-skills", {
	dirs: [`work/.agents/skills`],
	symlinks: { homelink: "work" },
	home: "homelink",
	globalSettings: { defaultProjectTrust: "never" },
});
extra("agents-without-skills-not-protected", {
	dirs: [`work/.agents`, `${CWD_REL}/.agents/other`],
	globalSettings: { defaultProjectTrust: "never" },
});
extra("ancestor-pi-dir-not-protected", {
	dirs: [`work/parent/.pi/extensions`],
	files: { "work/parent/.pi/settings.json": "{}\n" },
	globalSettings: { defaultProjectTrust: "never" },
});
// lookup: nearest boolean wins, null is skipped
extra("nearest-saved-wins", {
	files: marker("nearest-saved-wins"),
	storeText: `{"$ROOT/work": true, "$ROOT/work/parent": false}`,
	globalSettings: { defaultProjectTrust: "always" },
});
extra("nearest-saved-wins-true", {
	files: marker("nearest-saved-wins-true"),
	storeText: `{"$ROOT/work": false, "$ROOT/work/parent": true}`,
	globalSettings: { defaultProjectTrust: "never" },
});
extra("null-at-cwd-skipped", {
	files: marker("null-at-cwd-skipped"),
	storeText: `{"$ROOT/${CWD_REL}": null, "$ROOT/work/parent": false}`,
	globalSettings: { defaultProjectTrust: "always" },
});
extra("bom-store-read", {
	files: marker("bom-store-read"),
	storeText: `\uFEFF{"$ROOT/${CWD_REL}": true}`,
});
extra("unrelated-keys-ignored", {
	files: marker("unrelated-keys-ignored"),
	storeText: `{"$ROOT/work/parent/proj2": true, "$ROOT/work/parent/pro": true, "$ROOT/${CWD_REL}/sub": true}`,
});
extra("no-protected-saved-true", {
	storeText: `{"$ROOT/${CWD_REL}": true}`,
	globalSettings: { defaultProjectTrust: "never" },
});
// corrupt stores: pi stops (exit 1) and never rewrites the file
extra("corrupt-store-bad-json", {
	files: marker("corrupt-store-bad-json"),
	storeText: `{"a": `,
	hook: { trusted: "undecided", remember: false },
});
extra("corrupt-store-not-object", {
	files: marker("corrupt-store-not-object"),
	storeText: `[true]`,
});
extra("corrupt-store-bad-value", {
	files: marker("corrupt-store-bad-value"),
	storeText: `{"/x": "yes"}`,
});
extra("corrupt-store-empty", {
	files: marker("corrupt-store-empty"),
	storeText: ``,
});
extra("corrupt-store-no-protected", {
	storeText: `{"a": `,
});
extra("corrupt-store-cli-override", {
	files: marker("corrupt-store-cli-override"),
	storeText: `{"a": `,
	cli: "no_approve",
});
extra("corrupt-store-hook-remember", {
	files: marker("corrupt-store-hook-remember"),
	storeText: `{"a": `,
	hook: { trusted: "yes", remember: true },
});

// ---- the mock LLM ----------------------------------------------------------------------------

const scratch = realpathSync(mkdtempSync(join(tmpdir(), "pi-trust-matrix-")));
const reqLog = join(scratch, "requests.jsonl");
writeFileSync(join(scratch, "script.json"), "[]");
const mock = spawn(NODE22, [join(HERE, "mock-llm.mjs"), "--script", join(scratch, "script.json"), "--log", reqLog, "--port", "0"], {
	stdio: ["ignore", "pipe", "inherit"],
});
const port = await new Promise((resolve, reject) => {
	let buf = "";
	mock.stdout.on("data", (d) => {
		buf += d;
		const m = /PORT=(\d+)/.exec(buf);
		if (m) resolve(Number(m[1]));
	});
	mock.on("exit", () => reject(new Error("mock exited")));
});

// ---- running a cell --------------------------------------------------------------------------

function runCell(cell, index) {
	const root = join(scratch, `c${String(index).padStart(2, "0")}`);
	mkdirSync(root);
	const s = cell.setup;
	const agent = join(root, "agent");
	const cwd = join(root, CWD_REL);
	mkdirSync(join(agent, "extensions"), { recursive: true });
	mkdirSync(cwd, { recursive: true });
	mkdirSync(join(root, "home"), { recursive: true });
	for (const d of s.dirs) mkdirSync(join(root, d), { recursive: true });
	for (const [link, target] of Object.entries(s.symlinks || {})) symlinkSync(join(root, target), join(root, link));
	for (const [f, text] of Object.entries(s.files)) {
		mkdirSync(dirname(join(root, f)), { recursive: true });
		writeFileSync(join(root, f), text);
	}
	if (s.projectSettings) {
		mkdirSync(join(cwd, ".pi"), { recursive: true });
		writeFileSync(join(cwd, ".pi/settings.json"), JSON.stringify(s.projectSettings));
	}
	writeFileSync(join(agent, "extensions/probe.ts"), PROBE);
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
							name: "Mock",
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
	writeFileSync(
		join(agent, "settings.json"),
		JSON.stringify({ defaultProvider: "mock", defaultModel: "mock-model", ...s.globalSettings }),
	);
	const storePath = join(agent, "trust.json");
	if (s.storeText !== null) writeFileSync(storePath, s.storeText.replaceAll("$ROOT", root));
	const out = join(root, "probe.out");
	const args = [...PI];
	if (s.cli === "approve") args.push("-a");
	if (s.cli === "no_approve") args.push("-na");
	args.push("-p", "hi");
	const env = {
		PATH: process.env.PATH,
		HOME: join(root, s.home),
		PI_CODING_AGENT_DIR: agent,
		PI_OFFLINE: "1",
		TRUST_PROBE_OUT: out,
	};
	if (s.hook) {
		env.TRUST_PROBE_HOOK = s.hook.trusted;
		if (s.hook.remember) env.TRUST_PROBE_REMEMBER = "1";
	}
	const r = spawnSync(NODE22, args, { cwd, env, stdio: ["ignore", "pipe", "pipe"], timeout: 60000 });
	const stderr = String(r.stderr || "");
	const errLine = (stderr.match(/^Error: .*$/m) || [null])[0];
	const trusted = existsSync(out) ? readFileSync(out, "utf8") === "true" : null;
	const markerText = Object.values(s.files).find((t) => t.startsWith("TRUSTPROBE-"));
	let markerSeen = null;
	if (markerText) {
		const log = existsSync(reqLog) ? readFileSync(reqLog, "utf8") : "";
		markerSeen = log.includes(markerText.trim());
	}
	const storeAfter = existsSync(storePath) ? readFileSync(storePath, "utf8").replaceAll(root, "$ROOT") : null;
	const lockLeft = existsSync(`${storePath}.lock`);
	return {
		trusted,
		markerSeen,
		hookCalled: existsSync(`${out}.hook`),
		storeAfter,
		exitCode: r.status,
		// pi's error line, with $ROOT substituted (only for failing runs)
		error: r.status === 0 ? null : errLine ? errLine.replaceAll(root, "$ROOT") : null,
		lockLeft,
	};
}

const results = [];
let bad = 0;
for (const [i, cell] of cells.entries()) {
	const expect = runCell(cell, i);
	if (expect.markerSeen !== null && expect.exitCode === 0 && expect.markerSeen !== expect.trusted) {
		console.error(`trust-matrix: ${cell.name}: marker (${expect.markerSeen}) and isProjectTrusted (${expect.trusted}) disagree`);
		bad++;
	}
	console.error(`${cell.name}: trusted=${expect.trusted} exit=${expect.exitCode}${expect.error ? ` ${expect.error}` : ""}`);
	results.push({ ...cell, expect });
}
mock.kill("SIGTERM");
if (!process.env.TRUST_MATRIX_KEEP) rmSync(scratch, { recursive: true, force: true });
else console.error(`trust-matrix: scratch kept in ${scratch}`);
process.stdout.write(`${JSON.stringify({ pi: "1.6.0", cells: results }, null, 1)}\n`);
process.exit(bad ? 1 : 0);
