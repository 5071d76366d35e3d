// Replaces the generator's scratch paths in a fixture tree by placeholders, so the committed
// fixtures name no directory a fresh machine does not have. The tests put their own sandbox
// paths back (tests/integration/common.rs, Sandbox::with_fixtures and Sandbox::expected).
//
//   node fixture-placeholders.mjs FIXTURE_DIR --proj PROJ_ROOT --agent AGENT_DIR [--agent AGENT_DIR...]
//
// PROJ_ROOT is the folder holding one project cwd per scenario (make-fixtures.sh's $PROJ);
// each AGENT_DIR is a PI_CODING_AGENT_DIR whose sessions/ were collected into FIXTURE_DIR.
// In every file under FIXTURE_DIR (text as JSON writes it) and in every name under
// FIXTURE_DIR/sessions:
//   AGENT_DIR           -> @FIXTURE_AGENT@      (the sandbox's agent dir)
//   PROJ_ROOT           -> @FIXTURE_PROJ@       (the sandbox's project root)
//   --<enc PROJ_ROOT>-  -> --@FIXTURE_PROJ_ENC@- (pi's folder name for a cwd under it, where
//                          <enc p> is p without one leading / or \ and with / \ : made -)
// Then it checks that none of the original paths is left, and exits 1 if one is.
import { readdirSync, readFileSync, renameSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const args = process.argv.slice(2);
const dir = args.shift();
let proj = null;
const agents = [];
while (args.length) {
	const a = args.shift();
	const v = args.shift();
	if (v === undefined) usage();
	if (a === "--proj") proj = v;
	else if (a === "--agent") agents.push(v);
	else usage();
}
if (!dir || !proj || agents.length === 0) usage();
function usage() {
	console.error("usage: fixture-placeholders.mjs FIXTURE_DIR --proj PROJ_ROOT --agent AGENT_DIR [--agent AGENT_DIR...]");
	process.exit(2);
}

const strip = (p) => p.replace(/[/\\]+$/, "");
const enc = (p) => p.replace(/^[/\\]/, "").replace(/[/\\:]/g, "-");
const json = (s) => JSON.stringify(s).slice(1, -1);
// longest first, so a root inside another one is replaced before its parent
const pairs = [
	...agents.map((a) => [json(strip(a)), "@FIXTURE_AGENT@"]),
	[json(strip(proj)), "@FIXTURE_PROJ@"],
	[`--${enc(strip(proj))}-`, "--@FIXTURE_PROJ_ENC@-"],
].sort((x, y) => y[0].length - x[0].length);
const rewrite = (s) => pairs.reduce((t, [from, to]) => t.split(from).join(to), s);

let files = 0;
let renamed = 0;
const walk = (d) => {
	for (const name of readdirSync(d)) {
		let p = join(d, name);
		const to = rewrite(name);
		if (to !== name) {
			renameSync(p, join(d, to));
			p = join(d, to);
			renamed++;
		}
		if (statSync(p).isDirectory()) walk(p);
		else {
			const text = readFileSync(p, "utf8");
			const out = rewrite(text);
			if (out !== text) {
				writeFileSync(p, out);
				files++;
			}
		}
	}
};
walk(dir);

// what must be gone: each root as JSON writes it and as written, and the root's encoding
const gone = [...new Set([...pairs.map(([from]) => from), ...agents.map(strip), strip(proj), enc(strip(proj))])];
const left = [];
const check = (d) => {
	for (const name of readdirSync(d)) {
		const p = join(d, name);
		for (const from of gone) if (name.includes(from)) left.push(`${p}: name holds ${from}`);
		if (statSync(p).isDirectory()) check(p);
		else {
			const text = readFileSync(p, "utf8");
			for (const from of gone) if (text.includes(from)) left.push(`${p}: holds ${from}`);
		}
	}
};
check(dir);
if (left.length) {
	console.error("fixture-placeholders: paths left:\n  " + left.join("\n  "));
	process.exit(1);
}
console.error(`fixture-placeholders: ${files} files rewritten, ${renamed} names changed`);
