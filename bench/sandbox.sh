#!/usr/bin/env bash
# What the sandbox costs per bash call: `pi-run` with the faux provider on a run of N turns, each
# one `bash` call (`true`), then a final text; unconfined (`--sandbox danger-full-access`), and
# under `--sandbox read-only` and `--sandbox workspace-write` (in a git work tree, so the git paths
# are protected). The sandbox's set-up (ruleset, filter, namespace, the probe) is paid once per
# run, so the per-call cost is taken from two call counts, runs of all cells interleaved:
#   extra per sandboxed call = ((mode(N2) - mode(N1)) - (none(N2) - none(N1))) / (N2 - N1)
#   set-up per run           = mode(N1) - none(N1) - N1 * extra
# Target: <= 1 ms per call. Median wall time of BENCH_RUNS runs per cell. See bench/README.md.
#
#   bench/sandbox.sh
#
# Environment: BENCH_RUNS=11, BENCH_N1=1, BENCH_N2=101, PI_RUN_BIN=<binary> (default
# target/release/pi-run, built unless BENCH_SKIP_BUILD=1), BENCH_STRICT=1 (exit 1 when the target
# is missed), BENCH_KEEP=1 (keep the scratch directory), BENCH_JSON=file (the summary as JSON).
set -euo pipefail

die() { echo "bench/sandbox.sh: error: $*" >&2; exit 1; }
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
RUNS="${BENCH_RUNS:-11}"
N1="${BENCH_N1:-1}"
N2="${BENCH_N2:-101}"
command -v python3 >/dev/null || die "python3 is required"
command -v git >/dev/null || die "git is required"
[ -n "${EPOCHREALTIME:-}" ] || die "bash >= 5 is required (\$EPOCHREALTIME)"
[ "$N2" -gt "$N1" ] || die "BENCH_N2 must be larger than BENCH_N1"
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || die "BENCH_RUNS must be a whole number >= 1"

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

WORK="$(mktemp -d "${TMPDIR:-/tmp}/pi-bench-sandbox.XXXXXX")"
cleanup() { [ -n "${BENCH_KEEP:-}" ] && echo "kept $WORK" >&2 || rm -rf "$WORK"; }
trap cleanup EXIT
mkdir -p "$WORK/home/.ssh" "$WORK/agent" "$WORK/cwd" "$WORK/tmp"
echo "not for the model" > "$WORK/home/.ssh/id_ed25519"
git -C "$WORK/cwd" init -q

script() { # N -> path of a faux script with N turns of one bash call each, then a text
    local n=$1 f="$WORK/script-$1.jsonl"
    python3 - "$n" > "$f" <<'PY'
import json, sys
n = int(sys.argv[1])
for i in range(n):
    print(json.dumps({"toolCalls": [{"name": "bash", "arguments": {"command": "true"}, "id": f"c{i}"}]}))
print(json.dumps({"text": "done"}))
PY
    echo "$f"
}

one() { # script, mode -> wall ms
    local s=$1 mode=$2
    local t0=$EPOCHREALTIME
    (cd "$WORK/cwd" && env -i HOME="$WORK/home" PATH="$PATH" TMPDIR="$WORK/tmp" \
        PI_CODING_AGENT_DIR="$WORK/agent" \
        "$BIN" --no-session --provider faux --model "$s" --sandbox "$mode" -p go \
        > "$WORK/out.txt" 2> "$WORK/err.txt") || die "pi-run --sandbox $mode failed: $(cat "$WORK/err.txt")"
    local t1=$EPOCHREALTIME
    [ "$(cat "$WORK/out.txt")" = done ] || die "unexpected answer: $(cat "$WORK/out.txt")"
    if [ "$mode" != danger-full-access ]; then
        grep -q "^pi-run: sandbox $mode," "$WORK/err.txt" || die "no sandbox line for $mode: $(cat "$WORK/err.txt")"
    fi
    python3 -c "print(($t1 - $t0) * 1000)"
}

MODES=(danger-full-access read-only workspace-write)
S1=$(script "$N1"); S2=$(script "$N2")
declare -A T
for m in "${MODES[@]}"; do one "$S1" "$m" > /dev/null; one "$S2" "$m" > /dev/null; done   # warm-up
for _ in $(seq "$RUNS"); do
    for m in "${MODES[@]}"; do
        T["$m,1"]+="$(one "$S1" "$m") "
        T["$m,2"]+="$(one "$S2" "$m") "
    done
done

python3 - "$N1" "$N2" "${BENCH_STRICT:-}" "${BENCH_JSON:-}" \
    "${T[danger-full-access,1]}" "${T[danger-full-access,2]}" \
    "${T[read-only,1]}" "${T[read-only,2]}" \
    "${T[workspace-write,1]}" "${T[workspace-write,2]}" <<'PY'
import json, statistics, sys
n1, n2 = int(sys.argv[1]), int(sys.argv[2])
strict, out = sys.argv[3] == "1", sys.argv[4]
med = lambda s: statistics.median(float(x) for x in s.split())
cells = [med(s) for s in sys.argv[5:11]]
none1, none2, ro1, ro2, ww1, ww2 = cells
per_none = (none2 - none1) / (n2 - n1)
print(f"{'':22}{n1:>6} calls{n2:>8} calls   per call   extra per call   set-up per run")
print(f"{'danger-full-access':22}{none1:>9.1f} ms{none2:>9.1f} ms{per_none:>8.3f} ms")
summary = {"n1": n1, "n2": n2, "none_ms": [none1, none2], "per_call_none_ms": per_none}
worst = 0.0
for name, a, b in (("read-only", ro1, ro2), ("workspace-write", ww1, ww2)):
    extra = ((b - a) - (none2 - none1)) / (n2 - n1)
    setup = a - none1 - n1 * extra
    worst = max(worst, extra)
    print(f"{name:22}{a:>9.1f} ms{b:>9.1f} ms{per_none + extra:>8.3f} ms{extra:>12.3f} ms{setup:>14.1f} ms")
    summary[name] = {"ms": [a, b], "extra_per_call_ms": extra, "setup_ms": setup}
print(f"extra time per sandboxed bash call: {worst:.3f} ms at most (target <= 1 ms)")
if out:
    with open(out, "w") as f:
        json.dump(summary, f, indent=2)
if strict and worst > 1.0:
    sys.exit(1)
PY
