#!/usr/bin/env bash
# Time `pi-session compact --dry-run` (load, projection, token estimate, cut point) on one
# large session file. See bench/README.md.
#
#   bench/compact.sh [DATA_DIR]     DATA_DIR defaults to a new temp dir (removed afterwards)
#
# Environment knobs:
#   BENCH_MB=50            size of the session file in MB
#   BENCH_RUNS=10          timed runs
#   BENCH_SKIP_BUILD=1     don't run cargo build --release
#   PI_SESSION_BIN         binary to time (default: <cargo target dir>/release/pi-session)
set -euo pipefail

die() { echo "bench/compact.sh: error: $*" >&2; exit 1; }
note() { echo "bench/compact.sh: $*" >&2; }

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}"
command -v python3 >/dev/null || die "python3 is required"

if [ -z "${PI_SESSION_BIN:-}" ] && [ -z "${BENCH_SKIP_BUILD:-}" ]; then
    note "cargo build --release"
    (cd "$REPO" && cargo build --release --bin pi-session) || die "build failed"
fi
PS="${PI_SESSION_BIN:-$TARGET_DIR/release/pi-session}"
[ -x "$PS" ] || die "no pi-session at $PS"

if [ -n "${1:-}" ]; then
    DATA="$1"; mkdir -p "$DATA"
else
    DATA="$(mktemp -d "${TMPDIR:-/tmp}/pi-bench-compact.XXXXXX")"
    trap 'rm -rf "$DATA"' EXIT
fi
FILE="$DATA/big.jsonl"
MB="${BENCH_MB:-50}"

if [ ! -s "$FILE" ]; then
    note "writing a ${MB} MB session to $FILE"
    python3 - "$FILE" "$MB" <<'EOF'
import json, sys
path, mb = sys.argv[1], int(sys.argv[2])
target = mb * 1024 * 1024
t0 = 1795978531000
out = open(path, "w")
def line(o):
    s = json.dumps(o, separators=(",", ":"), ensure_ascii=False)
    out.write(s + "\n")
    return len(s) + 1
size = line({"type": "session", "version": 3, "id": "01a228a9-0000-7000-8000-000000000000",
             "timestamp": "2026-11-29T18:55:31.059Z", "cwd": "/tmp/bench"})
n = 0
parent = None
def entry(msg):
    global n, parent
    n += 1
    eid = f"{n:08x}"
    ts = t0 + n
    iso = "2026-11-29T18:55:31.%03dZ" % (n % 1000)
    size = line({"type": "message", "id": eid, "parentId": parent, "timestamp": iso, "message": dict(msg, timestamp=ts)})
    parent = eid
    return size
size += entry({"role": "system", "content": "", "sections": {"preamble": "You are a coding assistant.", "cwd": "<cwd>\n/tmp/bench\n</cwd>"}})
body = ("fn main() { println!(\"line {}\", 42); } // ünïcode\n" * 40)
usage = {"input": 1000, "output": 50, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 1050,
         "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}
k = 0
while size < target:
    k += 1
    size += entry({"role": "user", "content": [{"type": "text", "text": f"Step {k}: read src/f{k % 97}.rs and fix it"}]})
    size += entry({"role": "assistant", "content": [{"type": "text", "text": "Reading it."},
                   {"type": "toolCall", "id": f"call_{k}", "name": "read", "arguments": {"path": f"src/f{k % 97}.rs"}}],
                   "api": "openai-completions", "provider": "mock", "model": "mock-model", "usage": usage, "stopReason": "toolUse"})
    size += entry({"role": "toolResult", "toolCallId": f"call_{k}", "toolName": "read",
                   "content": [{"type": "text", "text": body}], "isError": False})
    size += entry({"role": "assistant", "content": [{"type": "text", "text": f"Fixed step {k}."}],
                   "api": "openai-completions", "provider": "mock", "model": "mock-model", "usage": usage, "stopReason": "stop"})
out.close()
EOF
fi

BYTES=$(stat -c %s "$FILE")
LINES=$(wc -l < "$FILE")
note "sanity run"
"$PS" compact "$FILE" --dry-run --format jsonl || die "dry run failed"
cat "$FILE" > /dev/null

RUNS="${BENCH_RUNS:-10}"
if command -v hyperfine >/dev/null; then
    hyperfine --warmup 2 --runs "$RUNS" "$PS compact $FILE --dry-run --format jsonl"
else
    times=()
    for _ in $(seq "$RUNS"); do
        s=$(date +%s.%N)
        "$PS" compact "$FILE" --dry-run --format jsonl > /dev/null
        e=$(date +%s.%N)
        times+=("$(echo "($e - $s) * 1000" | bc -l)")
    done
    printf '%s\n' "${times[@]}" | sort -n | awk -v bytes="$BYTES" -v lines="$LINES" '
        { t[NR] = $1 }
        END {
            med = (NR % 2) ? t[(NR + 1) / 2] : (t[NR / 2] + t[NR / 2 + 1]) / 2
            printf "compact --dry-run: %d bytes, %d lines, %d runs: median %.1f ms, min %.1f ms\n", bytes, lines, NR, med, t[1]
        }'
fi
if [ -x /usr/bin/time ]; then
    /usr/bin/time -f "peak RSS %M KB" "$PS" compact "$FILE" --dry-run --format jsonl > /dev/null
fi
note "load: $(uptime)"
