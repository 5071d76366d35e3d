#!/usr/bin/env bash
# Regenerate tests/fixtures/pi-sessions/ by running the REAL pi (1.6.0 and 0.73.1) against
# the loopback mock LLM (mock-llm.mjs), plus pi's own SDK for entries the CLI cannot make.
#
#   bash tests/oracle/install.sh        # once
#   bash tests/oracle/make-fixtures.sh  # rewrites tests/fixtures/pi-sessions/
#
# Env: PI_ORACLE_DIR (see install.sh), FIXTURE_OUT (default tests/fixtures/pi-sessions),
#      PI_FIXTURE_WORK (scratch, default a fresh mktemp directory; mock request logs land in
#      $PI_FIXTURE_WORK/logs/), PI_FIXTURE_PROJ (project cwds, default a fresh mktemp directory).
# Nothing but 127.0.0.1 is contacted (PI_OFFLINE=1; the only provider is the mock).
# Output layout (pi's own): $FIXTURE_OUT/sessions/--<enc cwd>--/<timestamp>_<id>.jsonl,
# $FIXTURE_OUT/MANIFEST.json, $FIXTURE_OUT/expected/ (pi SDK answers for the fixtures).
# File names, ids and timestamps change on every run; contents are otherwise stable.
# The scratch paths are replaced by placeholders at the end (fixture-placeholders.mjs:
# @FIXTURE_PROJ@, @FIXTURE_PROJ_ENC@, @FIXTURE_AGENT@), and the mktemp scratch is deleted.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
OUT="${FIXTURE_OUT:-$REPO/tests/fixtures/pi-sessions}"
WORK="${PI_FIXTURE_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/pi-fixture-work.XXXXXX")}"
PROJ="${PI_FIXTURE_PROJ:-$(mktemp -d "${TMPDIR:-/tmp}/pi-fixture-proj.XXXXXX")}"
. "$HERE/env.sh"
if [ "$PI_ORACLE_OK" != 1 ]; then
	echo "make-fixtures: pi oracle not installed under $PI_ORACLE_DIR; run tests/oracle/install.sh" >&2
	exit 1
fi
# keep the real user's config and any real API keys out of it
unset OPENAI_API_KEY ANTHROPIC_API_KEY GEMINI_API_KEY OPENROUTER_API_KEY || true
export PI_OFFLINE=1 PI_SKIP_VERSION_CHECK=1 NO_COLOR=1 CI=true

rm -rf "$WORK" "$PROJ"
mkdir -p "$WORK/logs" "$PROJ"
# pi records resolved paths (a cwd under a symlinked TMPDIR is recorded through the link's target)
WORK="$(cd "$WORK" && pwd -P)"
PROJ="$(cd "$PROJ" && pwd -P)"
AGENT160="$WORK/agent160"
AGENT073="$WORK/agent073"
MOCK_PID=""
cleanup() { [ -n "$MOCK_PID" ] && kill "$MOCK_PID" 2>/dev/null || true; }
trap cleanup EXIT

write_agent_dir() { # dir port
	mkdir -p "$1"
	cat >"$1/models.json" <<EOF
{
  "providers": {
    "mock": {
      "baseUrl": "http://127.0.0.1:$2/v1",
      "api": "openai-completions",
      "apiKey": "test",
      "models": [
        {
          "id": "mock-model",
          "name": "Mock Model",
          "reasoning": false,
          "input": ["text"],
          "cost": {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75},
          "contextWindow": 128000,
          "maxTokens": 4096
        }
      ]
    }
  }
}
EOF
	# keepRecentTokens is tiny so a manual compaction of a short chat has something to summarize
	cat >"$1/settings.json" <<EOF
{"defaultProvider": "mock", "defaultModel": "mock-model", "compaction": {"keepRecentTokens": 1}}
EOF
}

start_mock() { # scenario
	stop_mock
	local portfile="$WORK/logs/$1.port"
	"$NODE22" "$HERE/mock-llm.mjs" --script "$HERE/scenarios/$1.json" --log "$WORK/logs/$1.requests.jsonl" >"$portfile" &
	MOCK_PID=$!
	local port=""
	for _ in $(seq 100); do
		port="$(sed -n 's/^PORT=//p' "$portfile" 2>/dev/null)"
		[ -n "$port" ] && break
		sleep 0.05
	done
	[ -n "$port" ] || { echo "make-fixtures: mock did not start" >&2; exit 1; }
	write_agent_dir "$AGENT160" "$port"
	write_agent_dir "$AGENT073" "$port"
}
stop_mock() {
	if [ -n "$MOCK_PID" ]; then
		kill "$MOCK_PID" 2>/dev/null || true
		wait "$MOCK_PID" 2>/dev/null || true
		MOCK_PID=""
	fi
}

newproj() { mkdir -p "$PROJ/$1"; echo "$PROJ/$1"; }
# run pi in a project cwd: pi160 <cwd> args...
pi160() { local d="$1"; shift; (cd "$d" && PI_CODING_AGENT_DIR="$AGENT160" $PI160 "$@" </dev/null); }
pi073() { local d="$1"; shift; (cd "$d" && PI_CODING_AGENT_DIR="$AGENT073" $PI073 "$@" </dev/null); }
# the one session file in pi's folder for a cwd
session_of() { # agentdir cwd
	local enc="--$(printf '%s' "$2" | sed -e 's|^/||' -e 's|[/\\:]|-|g')--"
	local files=("$1/sessions/$enc"/*.jsonl)
	[ "${#files[@]}" = 1 ] && [ -f "${files[0]}" ] || { echo "make-fixtures: expected one session in $1/sessions/$enc" >&2; exit 1; }
	echo "${files[0]}"
}
log() { echo "make-fixtures: $*" >&2; }
SYS=(--system-prompt "You are a test assistant.")

# a. pi 1.6.0 -p plain text answer (default system prompt and tools)
log "a plain-160"
start_mock plain-160
D=$(newproj plain-160)
pi160 "$D" -p "hello" >"$WORK/logs/plain-160.out"

# b. pi 1.6.0 multi-turn tool use (read, then bash), named from the CLI
log "b tools-160"
start_mock tools-160
D=$(newproj tools-160)
printf 'hello from notes\n' >"$D/notes.txt"
pi160 "$D" --tools read,bash --name "Tool demo" -p "What is in notes.txt? Then run echo hi." >"$WORK/logs/tools-160.out"

# c. pi 1.6.0 continued session: -p, then -c -p
log "c continued-160"
start_mock continued-160
D=$(newproj continued-160)
pi160 "$D" "${SYS[@]}" --no-tools -p "first prompt" >"$WORK/logs/continued-160.out"
pi160 "$D" "${SYS[@]}" --no-tools -c -p "second prompt" >>"$WORK/logs/continued-160.out"

# d. pi 1.6.0 compaction via RPC: prompt, prompt, compact, prompt
log "d compaction-160"
start_mock compaction-160
D=$(newproj compaction-160)
echo '[{"type":"prompt","message":"Plan a parser in Rust."},{"type":"prompt","message":"What is step two?"},{"type":"compact"},{"type":"prompt","message":"And step three?"}]' |
	(cd "$D" && PI_CODING_AGENT_DIR="$AGENT160" "$NODE22" "$HERE/rpc-drive.mjs" --events "$WORK/logs/compaction-160.events.jsonl" -- \
		$PI160 --mode rpc "${SYS[@]}" --no-tools) >"$WORK/logs/compaction-160.out"

# e. pi 1.6.0 branch: two prompts (CLI), branchWithSummary at the first answer (SDK),
#    a prompt on the new branch (CLI, --session FILE), label + name (SDK)
log "e branched-160"
start_mock branched-160
D=$(newproj branched-160)
pi160 "$D" "${SYS[@]}" --no-tools -p "What is 2+2?" >"$WORK/logs/branched-160.out"
pi160 "$D" "${SYS[@]}" --no-tools -c -p "What is 3+3?" >>"$WORK/logs/branched-160.out"
F=$(session_of "$AGENT160" "$D")
"$NODE22" "$HERE/sdk-ops.mjs" branch "$F" "The user asked what 3+3 is; the answer was 6." >"$WORK/logs/branched-160.ops.jsonl"
pi160 "$D" "${SYS[@]}" --no-tools --session "$F" -p "What is 4+4?" >>"$WORK/logs/branched-160.out"
"$NODE22" "$HERE/sdk-ops.mjs" label "$F" "checkpoint-1" "Branch demo" >>"$WORK/logs/branched-160.ops.jsonl"

# g. custom + custom_message entries (SDK) in another cwd, then one more CLI prompt
log "g custom-160"
start_mock custom-160
D=$(newproj custom-160)
pi160 "$D" "${SYS[@]}" --no-tools -p "hello custom" >"$WORK/logs/custom-160.out"
F=$(session_of "$AGENT160" "$D")
"$NODE22" "$HERE/sdk-ops.mjs" custom "$F" >"$WORK/logs/custom-160.ops.jsonl"
pi160 "$D" "${SYS[@]}" --no-tools --session "$F" -p "Do you see the injected context?" >>"$WORK/logs/custom-160.out"

# h. pi 1.6.0 --fork of the plain session into another cwd (header parentSession)
log "h forked-160"
start_mock forked-160
D=$(newproj forked-160)
pi160 "$D" "${SYS[@]}" --no-tools --fork "$(session_of "$AGENT160" "$PROJ/plain-160")" -p "forked question" >"$WORK/logs/forked-160.out"

# f. pi 0.73.1: plain and tool use
log "f plain-073"
start_mock plain-073
D=$(newproj plain-073)
pi073 "$D" -p "hello" >"$WORK/logs/plain-073.out"
log "f tools-073"
start_mock tools-073
D=$(newproj tools-073)
printf 'hello from notes\n' >"$D/notes.txt"
pi073 "$D" --tools read,bash -p "What is in notes.txt? Then run echo hi." >"$WORK/logs/tools-073.out"
stop_mock

# collect: both agent dirs' sessions/ into $OUT/sessions (cwds differ, so no clashes)
log "collecting into $OUT"
rm -rf "$OUT/sessions" "$OUT/expected"
mkdir -p "$OUT/sessions" "$OUT/expected/context"
cp -R "$AGENT160/sessions/." "$OUT/sessions/"
cp -R "$AGENT073/sessions/." "$OUT/sessions/"

SCEN_JSON='[
 {"name":"plain-160","scenario":"a","pi":"1.6.0","how":"pi -p hello (default system prompt and tools)","features":["model_change","thinking_level_change","system message","user","assistant"]},
 {"name":"tools-160","scenario":"b","pi":"1.6.0","how":"pi --tools read,bash --name \"Tool demo\" -p ...; model calls read(notes.txt), then bash(echo hi), then answers","features":["session_info (--name)","thinking block","toolCall","toolResult read","toolResult bash","cacheRead usage"]},
 {"name":"continued-160","scenario":"c","pi":"1.6.0","how":"pi -p \"first prompt\"; pi -c -p \"second prompt\"","features":["two user messages in one file"]},
 {"name":"compaction-160","scenario":"d","pi":"1.6.0","how":"pi --mode rpc: prompt, prompt, compact, prompt (keepRecentTokens=1, split-turn compaction)","features":["compaction"]},
 {"name":"branched-160","scenario":"e","pi":"1.6.0","how":"pi -p; pi -c -p; SDK branchWithSummary(first assistant); pi --session FILE -p; SDK appendLabelChange(first user) + appendSessionInfo","features":["branch (two children of the first assistant entry)","branch_summary","label","session_info","leaf on second branch"]},
 {"name":"custom-160","scenario":"g","pi":"1.6.0","how":"pi -p; SDK appendCustomEntry + 2x appendCustomMessageEntry; pi --session FILE -p","features":["custom","custom_message (display true, string content)","custom_message (display false, array content)"]},
 {"name":"forked-160","scenario":"h","pi":"1.6.0","how":"pi --fork <plain-160 session> -p ... in another cwd","features":["header parentSession"]},
 {"name":"plain-073","scenario":"f","pi":"0.73.1","how":"pi -p hello","features":["0.73.1 layout"]},
 {"name":"tools-073","scenario":"f","pi":"0.73.1","how":"pi --tools read,bash -p ...; read then bash then answer","features":["0.73.1 toolCall/toolResult"]}
]'
PROJ="$PROJ" OUT="$OUT" WORK="$WORK" SCEN_JSON="$SCEN_JSON" "$NODE22" --input-type=module -e '
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
const { PROJ, OUT, WORK, SCEN_JSON } = process.env;
const scen = JSON.parse(SCEN_JSON);
const enc = (cwd) => `--${cwd.replace(/^[/\\]/, "").replace(/[/\\:]/g, "-")}--`;
const root = join(OUT, "sessions");
const files = {};
for (const d of readdirSync(root)) for (const f of readdirSync(join(root, d))) (files[d] ??= []).push(`sessions/${d}/${f}`);
const out = {
  generatedBy: "tests/oracle/make-fixtures.sh",
  note: "Paths are relative to this directory. Each session was recorded with its cwd set to <project root>/<scenario name>, in scratch directories of the generator (make-fixtures.sh). Those scratch paths are stored as placeholders (tests/oracle/fixture-placeholders.mjs): @FIXTURE_PROJ@ is the project root, @FIXTURE_PROJ_ENC@ its encoding in session folder names, @FIXTURE_AGENT@ the agent dir that held sessions/. Tests copy the fixtures into their sandbox with the placeholders replaced by sandbox paths (tests/integration/common.rs).",
  scenarios: scen.map((s) => {
    const cwd = join(PROJ, s.name);
    const fl = (files[enc(cwd)] ?? []).sort();
    if (fl.length !== 1) throw new Error(`scenario ${s.name}: expected 1 file, got ${fl.length}`);
    const header = JSON.parse(readFileSync(join(OUT, fl[0]), "utf8").split("\n")[0]);
    return { ...s, file: fl[0], sessionId: header.id, version: header.version ?? null, mockScript: `tests/oracle/scenarios/${s.name}.json`, context: `expected/context/${s.name}.json` };
  }),
};
writeFileSync(join(OUT, "MANIFEST.json"), JSON.stringify(out, null, 2) + "\n");
for (const s of out.scenarios) console.log(`${s.name}\t${s.file}`);
'

# pi SDK answers for the fixtures (golden files)
"$NODE22" "$HERE/sdk-list.mjs" --all "$OUT/sessions" --relative "$OUT" >"$OUT/expected/list-all.json"
"$NODE22" -e '
const m = require(process.argv[1]);
for (const s of m.scenarios) console.log(s.name + "\t" + s.file + "\t" + process.argv[2] + "/" + s.name);
' "$OUT/MANIFEST.json" "$PROJ" | while IFS=$'\t' read -r name file cwd; do
	"$NODE22" "$HERE/sdk-context.mjs" "$OUT/$file" >"$OUT/expected/context/$name.json"
	"$NODE22" "$HERE/sdk-list.mjs" --cwd "$cwd" "$OUT/$(dirname "$file")" --relative "$OUT" >"$OUT/expected/list-$name.json"
done

# the abandoned first branch of branched-160, by its old leaf id (the branch_summary's fromId)
BR_FILE="$("$NODE22" -e 'const m=require(process.argv[1]);process.stdout.write(m.scenarios.find(s=>s.name==="branched-160").file)' "$OUT/MANIFEST.json")"
FROM_ID="$("$NODE22" -e 'for (const l of require("fs").readFileSync(process.argv[1],"utf8").trim().split("\n")) { const e=JSON.parse(l); if (e.type==="branch_summary") process.stdout.write(e.fromId); }' "$OUT/$BR_FILE")"
"$NODE22" "$HERE/sdk-context.mjs" "$OUT/$BR_FILE" "$FROM_ID" >"$OUT/expected/context/branched-160.first-branch.json"

# sanity checks: the features each scenario must have
"$NODE22" -e '
const fs = require("fs"), path = require("path");
const out = process.argv[1], m = require(path.join(out, "MANIFEST.json"));
const ents = (s) => fs.readFileSync(path.join(out, s.file), "utf8").trim().split("\n").map((l) => JSON.parse(l));
const by = Object.fromEntries(m.scenarios.map((s) => [s.name, ents(s)]));
const fail = [];
const need = (c, msg) => { if (!c) fail.push(msg); };
const has = (n, t) => by[n].some((e) => e.type === t);
const roles = (n, r) => by[n].filter((e) => e.type === "message" && e.message.role === r).length;
need(roles("plain-160", "assistant") === 1, "plain-160: one assistant message");
need(by["tools-160"].some((e) => e.type === "message" && e.message.role === "toolResult" && e.message.toolName === "read"), "tools-160: read result");
need(by["tools-160"].some((e) => e.type === "message" && e.message.role === "toolResult" && e.message.toolName === "bash"), "tools-160: bash result");
need(has("tools-160", "session_info"), "tools-160: session_info");
need(roles("continued-160", "user") === 2, "continued-160: two user messages");
need(has("compaction-160", "compaction"), "compaction-160: compaction entry");
need(has("branched-160", "branch_summary") && has("branched-160", "label"), "branched-160: branch_summary + label");
const kids = {};
for (const e of by["branched-160"]) if (e.id) kids[e.parentId] = (kids[e.parentId] || 0) + 1;
need(Object.values(kids).some((k) => k >= 2), "branched-160: an entry with two children");
need(has("custom-160", "custom") && has("custom-160", "custom_message"), "custom-160: custom + custom_message");
need(typeof by["forked-160"][0].parentSession === "string", "forked-160: parentSession header");
need(roles("plain-073", "assistant") === 1, "plain-073: one assistant");
need(roles("tools-073", "toolResult") === 2, "tools-073: two tool results");
for (const s of m.scenarios) { const sz = fs.statSync(path.join(out, s.file)).size; if (sz > 16384) console.error(`warning: ${s.file} is ${sz} bytes`); }
if (fail.length) { console.error("make-fixtures: FAILED checks:\n  " + fail.join("\n  ")); process.exit(1); }
console.error("make-fixtures: all checks passed");
' "$OUT"

# the scratch roots become placeholders (the tests put their sandbox paths back)
"$NODE22" "$HERE/fixture-placeholders.mjs" "$OUT" --proj "$PROJ" --agent "$AGENT160" --agent "$AGENT073"
# the scratch made here goes (a PI_FIXTURE_WORK / PI_FIXTURE_PROJ given by the caller stays)
[ -n "${PI_FIXTURE_WORK:-}" ] || rm -rf "$WORK"
[ -n "${PI_FIXTURE_PROJ:-}" ] || rm -rf "$PROJ"
log "done: $OUT"
