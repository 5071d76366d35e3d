#!/usr/bin/env bash
# Experiments behind FINDINGS.md (CLI side): pi 1.6.0 --export, --session FILE -p, what
# opening a session does to the file, and how pi reacts to damaged session files.
#   bash tests/oracle/probe-cli.sh      (needs install.sh and make-fixtures.sh output)
# Works on copies in a scratch dir; the mock answers "ok" to everything.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
FIX="${FIXTURE_OUT:-$HERE/../fixtures/pi-sessions}"
. "$HERE/env.sh"
export PI_OFFLINE=1 NO_COLOR=1 CI=true
W="$(mktemp -d -t pi-probe-cli.XXXXXX)"
AGENT="$W/agent"
mkdir -p "$AGENT" "$W/proj"
"$NODE22" "$HERE/mock-llm.mjs" --log "$W/requests.jsonl" >"$W/port" &
MOCK=$!
trap 'kill $MOCK 2>/dev/null; rm -rf "$W"' EXIT
for _ in $(seq 100); do PORT="$(sed -n 's/^PORT=//p' "$W/port" 2>/dev/null)"; [ -n "$PORT" ] && break; sleep 0.05; done
cat >"$AGENT/models.json" <<EOF
{"providers":{"mock":{"baseUrl":"http://127.0.0.1:$PORT/v1","api":"openai-completions","apiKey":"test","models":[{"id":"mock-model","name":"Mock Model","reasoning":false,"input":["text"],"cost":{"input":3,"output":15,"cacheRead":0.3,"cacheWrite":3.75},"contextWindow":128000,"maxTokens":4096}]}}}
EOF
echo '{"defaultProvider":"mock","defaultModel":"mock-model"}' >"$AGENT/settings.json"
pi() { (cd "$W/proj" && PI_CODING_AGENT_DIR="$AGENT" $PI160 "$@"); }
src() { "$NODE22" -e 'const m=require(process.argv[1]);process.stdout.write(m.scenarios.find(s=>s.name===process.argv[2]).file)' "$FIX/MANIFEST.json" "$1"; }
show() { # title cmd...
	echo "### $1"; shift
	"$@" >"$W/out" 2>"$W/err"; local rc=$?
	echo "exit=$rc"; echo "stdout: $(head -c 400 "$W/out" | tr '\n' '|')"; echo "stderr: $(head -c 600 "$W/err" | tr '\n' '|')"
}
difffile() { # before after
	if cmp -s "$1" "$2"; then echo "file: unchanged"; else echo "file: CHANGED, new lines:"; diff "$1" "$2" | sed -n 's/^> //p' | cut -c1-300; fi
}

cp "$FIX/$(src plain-160)" "$W/plain.jsonl"
cp "$FIX/$(src branched-160)" "$W/branched.jsonl"

show "--export FILE out.html" pi --export "$W/branched.jsonl" "$W/out.html"
ls -l "$W/out.html" 2>/dev/null | awk '{print "html bytes:", $5}'
show "--export FILE (no output path)" pi --export "$W/branched.jsonl"
ls "$W/proj" | sed 's/^/proj file: /'
show "--export missing file" pi --export "$W/nope.jsonl" "$W/x.html"

cp "$W/plain.jsonl" "$W/before.jsonl"
show "--session FILE -p (continue against mock)" pi --session "$W/plain.jsonl" -p "next question"
difffile "$W/before.jsonl" "$W/plain.jsonl"
ls "$AGENT/sessions" 2>/dev/null | sed 's/^/agent sessions dir: /'

cp "$W/branched.jsonl" "$W/before.jsonl"
show "--mode rpc open + get_state only (no prompt)" bash -c "echo '[{\"type\":\"get_state\"}]' | (cd '$W/proj' && PI_CODING_AGENT_DIR='$AGENT' '$NODE22' '$HERE/rpc-drive.mjs' -- $PI160 --mode rpc --session '$W/branched.jsonl') | head -c 300"
difffile "$W/before.jsonl" "$W/branched.jsonl"
show "--mode rpc open with --thinking high + get_state" bash -c "echo '[{\"type\":\"get_state\"}]' | (cd '$W/proj' && PI_CODING_AGENT_DIR='$AGENT' '$NODE22' '$HERE/rpc-drive.mjs' -- $PI160 --mode rpc --thinking high --session '$W/branched.jsonl') >/dev/null"
difffile "$W/before.jsonl" "$W/branched.jsonl"

cp "$W/before.jsonl" "$W/branched.jsonl"
show "--session FILE -p with a different --system-prompt" pi --session "$W/branched.jsonl" --system-prompt "Different prompt." -p "q"
difffile "$W/before.jsonl" "$W/branched.jsonl"

# damaged files
H='{"type":"session","version":3,"id":"probe-1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"'"$W/proj"'"}'
U='{"type":"message","id":"u1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"old q","timestamp":1767225601000}}'
A='{"type":"message","id":"a1","parentId":"u1","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"old a"}],"api":"openai-completions","provider":"mock","model":"mock-model","usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":1767225602000}}'
probe_damaged() { # name content
	printf '%s' "$2" >"$W/d.jsonl"; cp "$W/d.jsonl" "$W/before.jsonl"
	local nreq; nreq=$(wc -l <"$W/requests.jsonl" 2>/dev/null || echo 0)
	show "damaged: $1: --session FILE -p" pi --session "$W/d.jsonl" -p "hi"
	difffile "$W/before.jsonl" "$W/d.jsonl"
	[ "$(wc -l <"$W/requests.jsonl")" != "$nreq" ] && echo "last request messages: $(tail -1 "$W/requests.jsonl" | "$NODE22" -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const r=JSON.parse(s);console.log(JSON.stringify((r.body.messages||[]).map(m=>m.role+":"+JSON.stringify(m.content).slice(0,40))))})')"
	printf '%s' "$2" >"$W/d.jsonl"
	show "damaged: $1: --export" pi --export "$W/d.jsonl" "$W/d.html"
}
probe_damaged "malformed middle line" "$H
$U
{this is not json
$A
"
probe_damaged "unknown entry type" "$H
$U
{\"type\":\"mystery_entry\",\"id\":\"m1\",\"parentId\":\"u1\",\"timestamp\":\"2026-01-01T00:00:01.500Z\",\"foo\":1}
${A/\"parentId\":\"u1\"/\"parentId\":\"m1\"}
"
probe_damaged "unknown message role" "$H
$U
{\"type\":\"message\",\"id\":\"m1\",\"parentId\":\"u1\",\"timestamp\":\"2026-01-01T00:00:01.500Z\",\"message\":{\"role\":\"alien\",\"content\":\"x\",\"timestamp\":1767225601500}}
${A/\"parentId\":\"u1\"/\"parentId\":\"m1\"}
"
probe_damaged "version 4 header" "${H/\"version\":3/\"version\":4}
$U
$A
"
probe_damaged "version 2 header (migrated)" "${H/\"version\":3/\"version\":2}
$U
$A
"
probe_damaged "no trailing newline" "$H
$U
$A"
probe_damaged "first line not a header" "$U
$A
"
probe_damaged "dangling parentId" "$H
${U/\"parentId\":null/\"parentId\":\"ghost\"}
$A
"
printf '%s\n%s\n%s\n' "$H" "$U" "$A" >"$W/m.jsonl"; cp "$W/m.jsonl" "$W/before.jsonl"
show "rpc open + get_state of a file WITHOUT model_change/thinking_level_change" bash -c "echo '[{\"type\":\"get_state\"}]' | (cd '$W/proj' && PI_CODING_AGENT_DIR='$AGENT' '$NODE22' '$HERE/rpc-drive.mjs' -- $PI160 --mode rpc --session '$W/m.jsonl') >/dev/null"
difffile "$W/before.jsonl" "$W/m.jsonl"
show "same with --thinking high --model mock/mock-model" bash -c "echo '[{\"type\":\"get_state\"}]' | (cd '$W/proj' && PI_CODING_AGENT_DIR='$AGENT' '$NODE22' '$HERE/rpc-drive.mjs' -- $PI160 --mode rpc --thinking high --model mock/mock-model --session '$W/m.jsonl') >/dev/null"
difffile "$W/before.jsonl" "$W/m.jsonl"
show "--session NONEXISTENT.jsonl -p" pi --session "$W/new-file.jsonl" -p "hi"
[ -f "$W/new-file.jsonl" ] && echo "created: $(head -c 200 "$W/new-file.jsonl")"
show "-p with no prompt and no stdin" pi -p </dev/null
echo "### requests seen by the mock: $(wc -l <"$W/requests.jsonl")"
