#!/usr/bin/env node
// pi 1.6.0's own answer to "list sessions", as JSON.   Run with Node 22 ($NODE22).
//
//   $NODE22 sdk-list.mjs --all <sessionsRoot>        SessionManager.listAll() (no args), i.e. the
//        default walk of <agentDir>/sessions, with the agent dir pointed at <sessionsRoot>
//        (<sessionsRoot> holds the --<enc cwd>-- folders, like ~/.pi/agent/sessions)
//   $NODE22 sdk-list.mjs --all-flat <dir>             SessionManager.listAll(<dir>) verbatim
//        (NB: with an explicit dir pi lists only *.jsonl directly inside <dir>, no subfolders)
//   $NODE22 sdk-list.mjs --cwd <cwd> <sessionDir>     SessionManager.list(<cwd>, <sessionDir>)
//   $NODE22 sdk-list.mjs --cwd <cwd> --agent-dir <agentDir>
//        SessionManager.list(<cwd>) with PI_CODING_AGENT_DIR=<agentDir> (the default folder
//        <agentDir>/sessions/--<enc cwd>--/; pi creates that folder if missing)
// Options:
//   --relative <root>   print `path` and `parentSessionPath` relative to <root> when inside it
//   --pi-order          keep pi's order (modified desc) instead of sorting by path
//
// Output: JSON array of SessionInfo, sorted by path (byte order) unless --pi-order:
//   {path, id, cwd, name, parentSessionPath, created, modified, messageCount, firstMessage,
//    allMessagesText}
// Dates are ISO strings (an invalid Date -> null). `name` and `parentSessionPath` are
// null when pi leaves them undefined. See FINDINGS.md for what each field means.
import { mkdtempSync, realpathSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join, relative, resolve, sep } from "node:path";
import { dateReplacer, loadSdk } from "./sdk.mjs";

const args = process.argv.slice(2);
const take = (name) => {
	const i = args.indexOf(name);
	if (i < 0) return undefined;
	const v = args[i + 1];
	args.splice(i, 2);
	return v;
};
const flag = (name) => {
	const i = args.indexOf(name);
	if (i < 0) return false;
	args.splice(i, 1);
	return true;
};
const relRoot = take("--relative");
const piOrder = flag("--pi-order");
const agentDirOpt = take("--agent-dir");
const allRoot = take("--all");
const allFlat = take("--all-flat");
const cwdOpt = take("--cwd");

function usage() {
	console.error(
		"usage: sdk-list.mjs --all <sessionsRoot> | --all-flat <dir> | --cwd <cwd> (<sessionDir> | --agent-dir <agentDir>) [--relative <root>] [--pi-order]",
	);
	process.exit(2);
}

let tmp;
let mapBack = (p) => p;
let run;
if (allRoot !== undefined) {
	const root = resolve(allRoot);
	if (basename(root) === "sessions") {
		process.env.PI_CODING_AGENT_DIR = dirname(root);
	} else {
		tmp = mkdtempSync(join(realpathSync(tmpdir()), "pi-sdk-list-"));
		symlinkSync(root, join(tmp, "sessions"));
		process.env.PI_CODING_AGENT_DIR = tmp;
		const via = join(tmp, "sessions");
		mapBack = (p) => (typeof p === "string" && (p === via || p.startsWith(via + sep)) ? root + p.slice(via.length) : p);
	}
	run = (SM) => SM.listAll();
} else if (allFlat !== undefined) {
	run = (SM) => SM.listAll(resolve(allFlat));
} else if (cwdOpt !== undefined) {
	if (agentDirOpt !== undefined) {
		process.env.PI_CODING_AGENT_DIR = resolve(agentDirOpt);
		run = (SM) => SM.list(cwdOpt);
	} else if (args.length === 1) {
		const dir = resolve(args.shift());
		run = (SM) => SM.list(cwdOpt, dir);
	} else usage();
} else usage();

const { SessionManager } = await loadSdk();
let sessions;
try {
	sessions = await run(SessionManager);
} finally {
	if (tmp) rmSync(tmp, { recursive: true, force: true });
}

const rel = (p) => {
	if (typeof p !== "string" || !relRoot) return p;
	const r = relative(resolve(relRoot), p);
	return r.startsWith("..") || r === "" ? p : r.split(sep).join("/");
};
const out = sessions.map((s) => ({
	path: rel(mapBack(s.path)),
	id: s.id,
	cwd: s.cwd,
	name: s.name ?? null,
	parentSessionPath: s.parentSessionPath === undefined ? null : rel(s.parentSessionPath),
	created: s.created,
	modified: s.modified,
	messageCount: s.messageCount,
	firstMessage: s.firstMessage,
	allMessagesText: s.allMessagesText,
}));
if (!piOrder) out.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
process.stdout.write(`${JSON.stringify(out, dateReplacer, 2)}\n`);
