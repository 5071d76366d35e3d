#!/usr/bin/env bash
# The experiments behind FINDINGS.md §5 (tool flags, defaultTools) and §6
# (other CLI flags): runs pi 1.6.0 once per case against the mock LLM and
# prints its exit code, stderr and the tool names (and model) of the first
# request it sent.
#
#   . tests/oracle/env.sh && bash tests/oracle/probe-tools.sh
#
# A case is: <user settings extra JSON> <project settings JSON or -> <pi args...>
# (the project settings need -a to count).
set -u
. "$(dirname "$0")/env.sh"

probe() {
	local user=$1 proj=$2
	shift 2
	local w
	w=$(mktemp -d)
	mkdir -p "$w/home" "$w/agent" "$w/cwd"
	"$NODE22" "$PI_ORACLE_SCRIPTS/mock-llm.mjs" --log "$w/req.jsonl" --port 0 > "$w/mock.out" &
	local mock=$!
	for _ in $(seq 100); do grep -q PORT= "$w/mock.out" 2> /dev/null && break; sleep 0.05; done
	local port
	port=$(sed -n 's/PORT=//p' "$w/mock.out")
	local m='"input":["text"],"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0},"contextWindow":128000,"maxTokens":4096'
	cat > "$w/agent/models.json" << J
{"providers":{"mock":{"baseUrl":"http://127.0.0.1:$port/v1","api":"openai-completions","apiKey":"test","models":[
 {"id":"mock-model","name":"Mock","reasoning":false,$m},
 {"id":"other-model","name":"Other","reasoning":false,$m},
 {"id":"think-model","name":"Think","reasoning":true,$m}]}}}
J
	echo "{\"defaultProvider\":\"mock\",\"defaultModel\":\"mock-model\"$user}" > "$w/agent/settings.json"
	if [ "$proj" != "-" ]; then
		mkdir -p "$w/cwd/.pi"
		echo "$proj" > "$w/cwd/.pi/settings.json"
	fi
	(cd "$w/cwd" && HOME="$w/home" PI_CODING_AGENT_DIR="$w/agent" PI_OFFLINE=1 $PI160 "$@" < /dev/null > "$w/out" 2> "$w/err")
	local rc=$?
	kill "$mock"
	printf '%s | %s | %s\n  rc=%s stderr=%s\n' "$user" "$proj" "$*" "$rc" "$(head -c 200 "$w/err")"
	if [ -s "$w/req.jsonl" ]; then
		head -n 1 "$w/req.jsonl" | "$NODE22" -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const r=JSON.parse(s).body;console.log("  tools=%j model=%s effort=%s",(r.tools||[]).map(t=>t.function.name),r.model,r.reasoning_effort)})'
	else
		echo "  (no request)"
	fi
	rm -rf "$w"
}

# --tools, -xt, -nt, -nbt
for args in "--tools gr*" "--tools write,*e*" "--tools ls,read,ls" "--tools *" "--tools -bash" \
	"--tools +grep,-bash" "--tools read,-bash" "--tools +gr*" "--tools -x*" "--tools nosuch" \
	"--tools READ" "--tools re?d" "-nt" "-nbt" "-nt -t +grep" "-nbt --tools ls,grep" \
	"-xt b*" "-xt *" "-xt bash -xt read" "--tools read --tools grep" "--tools grep -xt gr*"; do
	set -f
	# shellcheck disable=SC2086
	probe '' - -p $args hi
	set +f
done
probe '' - -p --tools ' read , grep ' hi
probe '' - -p --tools '' hi
# defaultTools, user and (trusted) project
for dt in '["+grep"]' '["grep"]' '[]' '["read","+grep"]' '["+grep","read"]' '["read","-read","+grep"]' \
	'["gr*"]' '["+gr*"]' '[" +grep"]' '"read"' 'null' '[1,"grep"]'; do
	probe ",\"defaultTools\":$dt" - -p hi
done
probe ',"defaultTools":["grep"]' - -p --tools +ls hi
probe ',"defaultTools":["grep"]' - -p -nbt hi
for pair in '["grep"]|["+ls"]' '["grep"]|["ls"]' '["grep"]|[]' '["+grep"]|[]' '[]|["+ls"]' \
	'["+grep"]|["read","+ls"]' '"x"|["+ls"]' '["grep"]|"x"' '["-read"]|["+read"]'; do
	probe ",\"defaultTools\":${pair%%|*}" "{\"defaultTools\":${pair#*|}}" -p -a hi
done
probe ',"defaultTools":["grep"]' '{"defaultTools":["+ls"]}' -p hi
# -a / -na: the last one counts
probe '' '{"defaultTools":["ls"]}' -p -na -a hi
probe '' '{"defaultTools":["ls"]}' -p -a -na hi
# other flags (§6)
for args in "--models other-model" "--models oth*" "--models other-model,mock-model" \
	"--models think-model:high" "--models nosuch,other*" "--model mock-model --models other-model" \
	"--session-id abc" "--session-id -bad" "--tui-mode regular" "--tui-mode bogus" "--use-theme nosuch" \
	"--verbose" "--offline" "--no-mcp" "--no-themes" "--theme ./nosuch.json" "-e ./nosuch.ts" \
	"--thinking bogus" "--name -foo" "--exclude-tools=bash"; do
	set -f
	# shellcheck disable=SC2086
	probe '' - -p $args hi
	set +f
done
probe '' - -v
