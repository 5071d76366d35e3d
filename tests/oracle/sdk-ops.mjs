#!/usr/bin/env node
// Fixture helper: let pi 1.6.0's own SessionManager append entries to a session file.
// Run with Node 22. Used by make-fixtures.sh; prints a JSON object with the new ids.
//
//   $NODE22 sdk-ops.mjs branch <file> <summary>
//       branchWithSummary(<id of the FIRST assistant message>, summary, {readFiles:[],modifiedFiles:[]})
//       -> leaf is the new branch_summary entry (a second child of that assistant entry)
//   $NODE22 sdk-ops.mjs label <file> <label> [name]
//       appendLabelChange(<id of the FIRST user message>, label); appendSessionInfo(name) if given
//   $NODE22 sdk-ops.mjs custom <file>
//       appendCustomEntry("fixture-ext", {count: 42, items: ["a", "b"]})
//       appendCustomMessageEntry("fixture-ext", "Injected context from the fixture extension.", true, {source: "fixture"})
//       appendCustomMessageEntry("fixture-hidden", [{type:"text", text:"Hidden note."}], false)
import { loadSdk } from "./sdk.mjs";

const [op, file, ...rest] = process.argv.slice(2);
if (!op || !file) {
	console.error("usage: sdk-ops.mjs branch|label|custom <file> [...]");
	process.exit(2);
}
const { SessionManager } = await loadSdk();
const sm = SessionManager.open(file);
const entries = sm.getEntries();
const firstRole = (role) => entries.find((e) => e.type === "message" && e.message.role === role);
const out = { op, file };

if (op === "branch") {
	const a = firstRole("assistant");
	if (!a) throw new Error("no assistant message");
	out.branchPoint = a.id;
	out.previousLeaf = sm.getLeafId();
	out.branchSummaryId = sm.branchWithSummary(a.id, rest[0] ?? "Summary of the abandoned branch.", {
		readFiles: [],
		modifiedFiles: [],
	});
} else if (op === "label") {
	const u = firstRole("user");
	if (!u) throw new Error("no user message");
	out.labelTarget = u.id;
	out.labelId = sm.appendLabelChange(u.id, rest[0] ?? "checkpoint-1");
	if (rest[1]) out.sessionInfoId = sm.appendSessionInfo(rest[1]);
} else if (op === "custom") {
	out.customId = sm.appendCustomEntry("fixture-ext", { count: 42, items: ["a", "b"] });
	out.customMessageId = sm.appendCustomMessageEntry(
		"fixture-ext",
		"Injected context from the fixture extension.",
		true,
		{ source: "fixture" },
	);
	out.hiddenCustomMessageId = sm.appendCustomMessageEntry(
		"fixture-hidden",
		[{ type: "text", text: "Hidden note." }],
		false,
	);
} else {
	console.error(`unknown op ${op}`);
	process.exit(2);
}
out.leafId = sm.getLeafId();
process.stdout.write(`${JSON.stringify(out)}\n`);
