#!/usr/bin/env node
// pi 1.6.0's buildSessionContext() for EVERY entry of each given session file taken as the
// leaf, plus the default leaf, in one Node process.   Run with Node 22.
//
//   $NODE22 sdk-context-all.mjs <file.jsonl>...
//
// Prints one JSON object: { "<file>": { "leaf": <default leaf id>, "contexts": { "<leafId>":
// {messages, thinkingLevel, model}, ... } } }. Each file is opened from a temporary copy, so
// SessionManager.open can never change it.
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join, resolve } from "node:path";
import { dateReplacer, loadSdk } from "./sdk.mjs";

const files = process.argv.slice(2);
if (files.length === 0) {
	console.error("usage: sdk-context-all.mjs <file.jsonl>...");
	process.exit(2);
}
const { SessionManager, buildSessionContext } = await loadSdk();
const out = {};
const tmp = mkdtempSync(join(tmpdir(), "pi-sdk-context-all-"));
try {
	for (const file of files) {
		const copy = join(tmp, basename(file));
		copyFileSync(resolve(file), copy);
		const sm = SessionManager.open(copy);
		const entries = sm.getEntries();
		const contexts = {};
		for (const e of entries) {
			const ctx = buildSessionContext(entries, e.id);
			contexts[e.id] = { messages: ctx.messages, thinkingLevel: ctx.thinkingLevel, model: ctx.model };
		}
		out[file] = { leaf: sm.getLeafId(), contexts };
	}
} finally {
	rmSync(tmp, { recursive: true, force: true });
}
process.stdout.write(`${JSON.stringify(out, dateReplacer)}\n`);
