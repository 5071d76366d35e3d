#!/usr/bin/env node
// List every session under an agent dir with the real pi 1.6.0 SDK and print the count.
//
//   node bench/pi-sdk-listall.mjs AGENT_DIR [--json]
//
// AGENT_DIR is what PI_CODING_AGENT_DIR would be (it contains sessions/--<cwd>--/*.jsonl).
// Note on the 1.6.0 API: SessionManager.listAll(sessionDir) with a *string* lists only the
// *.jsonl files directly inside that one directory (it is the flat "--session-dir" layout);
// the recursive all-projects scan is listAll() without a directory, which reads
// getSessionsDir() = $PI_CODING_AGENT_DIR/sessions.  So we set PI_CODING_AGENT_DIR before
// importing the SDK and call listAll() with no directory argument.  Pass --flat to call
// listAll(AGENT_DIR/sessions) instead (that returns 0 for the nested layout).
//
// The SDK location: $PI_SDK_DIR, else $PI_ORACLE_DIR/v160/node_modules/@earendil-works/pi-coding-agent
// (PI_ORACLE_DIR defaults to ~/.cache/pi-toolkit-oracle).
import path from "node:path";
import os from "node:os";
import { pathToFileURL } from "node:url";

const args = process.argv.slice(2);
const flat = args.includes("--flat");
const json = args.includes("--json");
const pos = args.filter((a) => !a.startsWith("--"));
if (pos.length !== 1) {
	console.error("usage: pi-sdk-listall.mjs AGENT_DIR [--json] [--flat]");
	process.exit(2);
}
const agentDir = path.resolve(pos[0]);
process.env.PI_CODING_AGENT_DIR = agentDir;

const oracle = process.env.PI_ORACLE_DIR || path.join(os.homedir(), ".cache", "pi-toolkit-oracle");
const sdkDir = process.env.PI_SDK_DIR || path.join(oracle, "v160", "node_modules", "@earendil-works", "pi-coding-agent");
const sdk = await import(pathToFileURL(path.join(sdkDir, "dist", "index.js")).href);
const { SessionManager } = sdk;

const t0 = performance.now();
const sessions = flat ? await SessionManager.listAll(path.join(agentDir, "sessions")) : await SessionManager.listAll();
const ms = performance.now() - t0;
if (json) {
	for (const s of sessions) {
		console.log(JSON.stringify({ path: s.path, id: s.id, cwd: s.cwd, name: s.name, parentSessionPath: s.parentSessionPath,
			created: s.created, modified: s.modified, messageCount: s.messageCount, firstMessage: s.firstMessage }));
	}
}
console.error(`pi ${sdk.VERSION ?? ""} listAll: ${sessions.length} sessions in ${ms.toFixed(0)} ms`);
console.log(String(sessions.length));
