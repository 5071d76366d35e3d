#!/usr/bin/env node
// pi 1.6.0's own buildSessionContext() for a session file, as JSON.   Run with Node 22.
//
//   $NODE22 sdk-context.mjs <file.jsonl> [leafId] [--in-place] [--meta]
//
// Opens the file with SessionManager.open() and prints {messages, thinkingLevel, model}:
//   - without leafId: sm.buildSessionContext()  (leaf = last entry of the file)
//   - with leafId:    buildSessionContext(sm.getEntries(), leafId)  (exported function;
//                     an unknown leafId falls back to the last entry, as in pi)
// By default a temporary COPY of the file is opened, because SessionManager.open may
// rewrite the file (version migration) or append a missing final newline. --in-place
// opens the given file itself. --meta adds {leafId, sessionName, header, entryCount}.
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join, resolve } from "node:path";
import { dateReplacer, loadSdk } from "./sdk.mjs";

const args = process.argv.slice(2);
const inPlace = args.includes("--in-place");
const meta = args.includes("--meta");
const pos = args.filter((a) => !a.startsWith("--"));
if (pos.length < 1 || pos.length > 2) {
	console.error("usage: sdk-context.mjs <file.jsonl> [leafId] [--in-place] [--meta]");
	process.exit(2);
}
const [file, leafId] = pos;
const { SessionManager, buildSessionContext } = await loadSdk();

let tmp;
let target = resolve(file);
if (!inPlace) {
	tmp = mkdtempSync(join(tmpdir(), "pi-sdk-context-"));
	const copy = join(tmp, basename(target));
	copyFileSync(target, copy);
	target = copy;
}
try {
	const sm = SessionManager.open(target);
	const ctx = leafId === undefined ? sm.buildSessionContext() : buildSessionContext(sm.getEntries(), leafId);
	const out = { messages: ctx.messages, thinkingLevel: ctx.thinkingLevel, model: ctx.model };
	if (meta) {
		out.leafId = leafId ?? sm.getLeafId();
		out.sessionName = sm.getSessionName() ?? null;
		out.header = sm.getHeader();
		out.entryCount = sm.getEntryCount();
	}
	process.stdout.write(`${JSON.stringify(out, dateReplacer, 2)}\n`);
} finally {
	if (tmp) rmSync(tmp, { recursive: true, force: true });
}
