#!/usr/bin/env bash
# Time and peak memory of pi-session / pi-run on degenerate session files: lines that are not
# entries, a very long chain of entries, a million damaged lines. See bench/README.md.
#
#   bench/degenerate.sh [DATA_DIR]     DATA_DIR defaults to a new temp dir (removed afterwards)
#
# Environment knobs:
#   BENCH_EMPTIES=1500000   `{}` lines of the first file (3 bytes each: ~4.5 MB)
#   BENCH_CHAIN=1000000     chained message entries of the second file (~156 MB)
#   BENCH_BAD=1000000       invalid-JSON lines of the third file (~9 MB)
#   BENCH_SKIP_BUILD=1      don't run cargo build --release
#   PI_SESSION_BIN, PI_RUN_BIN   binaries to time (default: <cargo target dir>/release/...)
set -euo pipefail

die() { echo "bench/degenerate.sh: error: $*" >&2; exit 1; }
note() { echo "bench/degenerate.sh: $*" >&2; }

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}"
[ -x /usr/bin/time ] && /usr/bin/time -f %M true >/dev/null 2>&1 || die "GNU time is required (apt-get install -y time)"
command -v python3 >/dev/null || die "python3 is required"

if [ -z "${PI_SESSION_BIN:-}${PI_RUN_BIN:-}" ] && [ -z "${BENCH_SKIP_BUILD:-}" ]; then
    note "cargo build --release"
    (cd "$REPO" && cargo build --release --bin pi-session --bin pi-run) || die "build failed"
fi
PS="${PI_SESSION_BIN:-$TARGET_DIR/release/pi-session}"
PR="${PI_RUN_BIN:-$TARGET_DIR/release/pi-run}"
[ -x "$PS" ] || die "no pi-session at $PS"
[ -x "$PR" ] || die "no pi-run at $PR"

if [ -n "${1:-}" ]; then
    DATA="$1"; mkdir -p "$DATA"
else
    DATA="$(mktemp -d "${TMPDIR:-/tmp}/pi-bench-degenerate.XXXXXX")"
    trap 'rm -rf "$DATA"' EXIT
fi

python3 - "$DATA" "${BENCH_EMPTIES:-1500000}" "${BENCH_CHAIN:-1000000}" "${BENCH_BAD:-1000000}" <<'EOF'
import os, sys
data, empties, chain, bad = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def header(sid):
    return '{"type":"session","version":3,"id":"%s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp"}\n' % sid
def write(name, sid, body):
    p = os.path.join(data, name)
    if os.path.exists(p):
        return
    with open(p, "w") as f:
        f.write(header(sid))
        body(f)
write("empties.jsonl", "deg-empties", lambda f: f.write("{}\n" * empties))
def chained(f):
    prev = "null"
    for i in range(chain):
        eid = "%08x" % i
        f.write('{"type":"message","id":"%s","parentId":%s,"timestamp":"2026-01-01T00:00:01.000Z",'
                '"message":{"role":"user","content":"m%d","timestamp":1}}\n' % (eid, prev, i))
        prev = '"%s"' % eid
write("chain.jsonl", "deg-chain", chained)
write("bad.jsonl", "deg-bad", lambda f: f.write("not json\n" * bad))
EOF

# The faux provider answers pi-run's continuation offline.
printf '{"text":"ok"}\n%.0s' $(seq 1 8) > "$DATA/faux.jsonl"

printf '\n%-9s %-8s %8s %8s %8s %12s %9s %7s\n' file command "size MB" "wall s" "user s" "peak RSS MB" "RSS/size" stderr
for f in empties chain bad; do
    file="$DATA/$f.jsonl"
    size=$(stat -c %s "$file")
    for cmd in "show" "tree" "stats" "context" "search" "label" "pi-run"; do
        # label needs an entry: only the chain has any.
        [ "$cmd" = label ] && [ "$f" != chain ] && continue
        copy="$DATA/work.jsonl"
        cp "$file" "$copy"
        case "$cmd" in
            search) args=("$PS" search zzz-no-such-text --session "$copy") ;;
            label) args=("$PS" label "$copy" 00000000 x) ;;
            pi-run) args=("$PR" --provider faux --model "$DATA/faux.jsonl" --session "$copy" -p more) ;;
            *) args=("$PS" "$cmd" "$copy" --format jsonl) ;;
        esac
        # (search finds nothing and exits 1; GNU time then adds a line first)
        /usr/bin/time -f "%e %U %M" -o "$DATA/time.txt" "${args[@]}" > /dev/null 2> "$DATA/err.txt" || true
        read -r secs user rss < <(tail -1 "$DATA/time.txt")
        printf '%-9s %-8s %8.1f %8s %8s %12.1f %9.1f %7s\n' "$f" "$cmd" "$(echo "$size / 1048576" | bc -l)" "$secs" "$user" \
            "$(echo "$rss / 1024" | bc -l)" "$(echo "$rss * 1024 / $size" | bc -l)" "$(wc -l < "$DATA/err.txt")"
    done
done
rm -f "$DATA/work.jsonl" "$DATA/time.txt" "$DATA/err.txt"
echo "(load average: $(cut -d' ' -f1-3 /proc/loadavg))"
