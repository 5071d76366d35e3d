#!/usr/bin/env node
// Experiments behind FINDINGS.md: crafted session files fed to pi 1.6.0's
// SessionManager.list/listAll/open. Run with Node 22:  $NODE22 tests/oracle/probe-sdk.mjs
// Prints one JSON object per experiment. Uses a scratch dir under $TMPDIR; touches nothing else.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadSdk } from "./sdk.mjs";

const { SessionManager } = await loadSdk();
const base = mkdtempSync(join(tmpdir(), "pi-probe-"));
process.env.PI_CODING_AGENT_DIR = join(base, "agent");
const J = (o) => JSON.stringify(o);
const hdr = (o = {}) => ({ type: "session", version: 3, id: "s-1", timestamp: "2026-01-01T00:00:00.000Z", cwd: "/p/a", ...o });
const msg = (id, parentId, message, ts = "2026-01-01T00:00:01.000Z") => ({ type: "message", id, parentId, timestamp: ts, message });
const user = (text, t) => ({ role: "user", content: text, timestamp: t });
const asst = (text, t) => ({ role: "assistant", content: [{ type: "text", text }], timestamp: t });
const info = (s) =>
	s && {
		id: s.id,
		name: s.name,
		cwd: s.cwd,
		parentSessionPath: s.parentSessionPath,
		created: Number.isNaN(s.created.getTime()) ? "Invalid Date" : s.created.toISOString(),
		modified: s.modified.toISOString(),
		messageCount: s.messageCount,
		firstMessage: s.firstMessage,
		allMessagesText: s.allMessagesText,
	};
const report = (name, result) => console.log(J({ name, result }));

let n = 0;
async function listOne(lines, { raw, mtime } = {}) {
	const dir = join(base, `one-${++n}`);
	mkdirSync(dir, { recursive: true });
	const f = join(dir, "x.jsonl");
	writeFileSync(f, raw ?? lines.map((l) => (typeof l === "string" ? l : J(l))).join("\n") + "\n");
	if (mtime) utimesSync(f, mtime, mtime);
	const r = await SessionManager.listAll(dir);
	return r.length ? info(r[0]) : "SKIPPED (not listed)";
}

// --- listing fields ---
report("header only", await listOne([hdr()]));
report("header only, bad header timestamp (mtime 2020-05-05)", await listOne([hdr({ timestamp: "nope" })], { mtime: new Date("2020-05-05T00:00:00Z") }));
report("no user message", await listOne([hdr(), msg("a", null, asst("hi", 1767225605000))]));
report("user with only image then user text", await listOne([
	hdr(),
	msg("a", null, { role: "user", content: [{ type: "image", data: "AA==", mimeType: "image/png" }], timestamp: 1767225601000 }),
	msg("b", "a", { role: "user", content: [{ type: "text", text: "one" }, { type: "image", data: "AA==", mimeType: "image/png" }, { type: "text", text: "two" }], timestamp: 1767225602000 }),
]));
report("system/toolResult/custom/bashExecution roles: counted, not text", await listOne([
	hdr(),
	msg("s", null, { role: "system", content: "sys", timestamp: 1767225699000 }),
	msg("u", "s", user("q", 1767225601000)),
	msg("a", "u", { role: "assistant", content: [{ type: "thinking", thinking: "hmm" }, { type: "toolCall", id: "c", name: "bash", arguments: {} }, { type: "text", text: "ans" }], timestamp: 1767225602000 }),
	msg("t", "a", { role: "toolResult", toolCallId: "c", toolName: "bash", content: [{ type: "text", text: "out" }], isError: false, timestamp: 1767225698000 }),
	msg("c", "t", { role: "custom", customType: "x", content: "cust", display: true, timestamp: 1767225697000 }),
	msg("b", "c", { role: "bashExecution", command: "ls", output: "o", exitCode: 0, cancelled: false, truncated: false, timestamp: 1767225696000 }),
	{ type: "custom_message", id: "cm", parentId: "b", timestamp: "2026-01-01T00:09:00.000Z", customType: "x", content: "cm text", display: true },
]));
report("modified: message.timestamp missing -> entry timestamp", await listOne([hdr(), msg("u", null, { role: "user", content: "q" }, "2026-03-03T03:03:03.000Z")]));
report("modified: max over ALL branches, user/assistant only", await listOne([
	hdr(),
	msg("u", null, user("q", 1767225601000)),
	msg("a1", "u", asst("late branch", 1767229999000)),
	msg("a2", "u", asst("early", 1767225603000)),
]));
report("name: latest session_info wins, trimmed; blank clears", await listOne([
	hdr(), { type: "session_info", id: "i1", parentId: null, timestamp: "t", name: "  First  " },
]));
report("name: set then cleared by empty", await listOne([
	hdr(), { type: "session_info", id: "i1", parentId: null, timestamp: "t", name: "First" },
	{ type: "session_info", id: "i2", parentId: "i1", timestamp: "t", name: "   " },
]));
report("name: non-string name (42)", await listOne([hdr(), { type: "session_info", id: "i1", parentId: null, timestamp: "t", name: 42 }]));
report("message entry with message:null", await listOne([hdr(), { type: "message", id: "m", parentId: null, timestamp: "t", message: null }]));
report("user content null", await listOne([hdr(), msg("u", null, { role: "user", content: null, timestamp: 1 })]));
report("garbage line before header", await listOne(["not json", hdr(), msg("u", null, user("q", 1767225601000))]));
report("blank lines + CRLF", await listOne([], { raw: `\r\n${J(hdr())}\r\n\r\n${J(msg("u", null, user("q", 1767225601000)))}\r\n` }));
report("first entry not a session header", await listOne([msg("u", null, user("q", 1)), hdr()]));
report("header without id", await listOne([{ type: "session", version: 3, timestamp: "2026-01-01T00:00:00.000Z", cwd: "/p" }]));
report("header version 4 + unknown entry type", await listOne([hdr({ version: 4 }), { type: "mystery", id: "z", parentId: null, timestamp: "t" }, msg("u", "z", user("q", 1767225601000))]));
report("header without cwd / with parentSession", await listOne([{ type: "session", id: "s", timestamp: "2026-01-01T00:00:00.000Z", parentSession: "/x/y.jsonl" }]));
report("empty file", await listOne([], { raw: "" }));

// --- folder walking ---
{
	const root = join(base, "agent", "sessions");
	mkdirSync(join(root, "--p-a--", "nested"), { recursive: true });
	mkdirSync(join(root, "--p-b--"), { recursive: true });
	writeFileSync(join(root, "--p-a--", "1.jsonl"), J(hdr({ id: "a1" })) + "\n");
	writeFileSync(join(root, "--p-a--", "2.json"), J(hdr({ id: "a2-not-jsonl" })) + "\n");
	writeFileSync(join(root, "--p-a--", "nested", "3.jsonl"), J(hdr({ id: "a3-nested" })) + "\n");
	writeFileSync(join(root, "--p-b--", "4.jsonl"), J(hdr({ id: "b4-cwd-/p/a" })) + "\n");
	writeFileSync(join(root, "--p-b--", "5.jsonl"), J(hdr({ id: "b5-cwd-/p/b", cwd: "/p/b" })) + "\n");
	writeFileSync(join(root, "top.jsonl"), J(hdr({ id: "top-level-file" })) + "\n");
	const ids = (r) => r.map((s) => s.id);
	report("listAll() default walk ids", ids(await SessionManager.listAll()));
	report("listAll(root) flat ids", ids(await SessionManager.listAll(root)));
	report("listAll(--p-a--) flat ids", ids(await SessionManager.listAll(join(root, "--p-a--"))));
	report("list('/p/a') (default dir = sessions/--p-a--) ids", ids(await SessionManager.list("/p/a")));
	report("list('/p/a', sessions/--p-b--) explicit dir -> header cwd filter", ids(await SessionManager.list("/p/a", join(root, "--p-b--"))));
	report("list('/p/b', sessions/--p-b--) explicit non-default dir", ids(await SessionManager.list("/p/b", join(root, "--p-b--"))));
	report("list('/p/b') default dir contains a cwd=/p/a file", ids(await SessionManager.list("/p/b")));
	report("list('/p/zzz') missing default folder created?", { ids: ids(await SessionManager.list("/p/zzz")), created: (() => { try { readFileSync(join(root, "--p-zzz--")); } catch (e) { return e.code === "EISDIR"; } return false; })() });
}

// --- ordering ---
{
	const dir = join(base, "order");
	mkdirSync(dir, { recursive: true });
	const mk = (file, id, t) => writeFileSync(join(dir, file), [J(hdr({ id })), J(msg("u", null, user("q", t)))].join("\n") + "\n");
	mk("a.jsonl", "A-t2", 1767225602000);
	mk("b.jsonl", "B-t1", 1767225601000);
	mk("c.jsonl", "C-t2", 1767225602000);
	mk("d.jsonl", "D-t3", 1767225603000);
	report("order listAll(dir): modified desc, ties in file-name-desc order", (await SessionManager.listAll(dir)).map((s) => s.id));
}

// --- open() side effects ---
{
	const dir = join(base, "open");
	mkdirSync(dir, { recursive: true });
	const cases = {
		"no trailing newline": J(hdr()) + "\n" + J(msg("u", null, user("q", 1))),
		"version 2 header": J(hdr({ version: 2 })) + "\n" + J(msg("u", null, { role: "hookMessage", content: "h", timestamp: 1 })) + "\n",
		"version 1 (no ids)": J({ type: "session", id: "v1", timestamp: "2026-01-01T00:00:00.000Z", cwd: "/p" }) + "\n" + J({ type: "message", timestamp: "t", message: user("q", 1) }) + "\n",
		"version 4 header": J(hdr({ version: 4 })) + "\n" + J(msg("u", null, user("q", 1))) + "\n",
		"bad line + unknown type": J(hdr()) + "\n{broken\n" + J({ type: "mystery", id: "z", parentId: null, timestamp: "t" }) + "\n" + J(msg("u", "z", user("q", 1))) + "\n",
		"first line not header": J(msg("u", null, user("q", 1))) + "\n",
		"empty file": "",
	};
	for (const [name, text] of Object.entries(cases)) {
		const f = join(dir, `${name.replace(/\W+/g, "_")}.jsonl`);
		writeFileSync(f, text);
		let res;
		try {
			const sm = SessionManager.open(f);
			const after = readFileSync(f, "utf8");
			res = {
				changed: after !== text,
				after: after === text ? undefined : after.split("\n").slice(0, 3).join("\n").slice(0, 300),
				entries: sm.getEntries().map((e) => e.type + (e.message ? `:${e.message.role}` : "")),
				leaf: sm.getLeafId(),
				contextRoles: sm.buildSessionContext().messages.map((m) => m.role),
			};
		} catch (e) {
			res = { error: String(e.message), fileAfter: readFileSync(f, "utf8") === text ? "unchanged" : "changed" };
		}
		report(`open(): ${name}`, res);
	}
}
rmSync(base, { recursive: true, force: true });
