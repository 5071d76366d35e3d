#!/usr/bin/env bash
# pi-resources vs pi 1.6.0 resolving the same tree (see bench/README.md).
#
#   bench/resources.sh            trees in ${BENCH_DIR:-/tmp/pi-bench-resources}, made on first use
#
# Tree "small": 50 skills (project .pi/skills, .agents/skills, user, ~/.agents),
# 30 prompt templates, 10 nested context-file levels. Tree "repo": the same
# resources at the root of a git repo holding 100,000 files. Both sides run
# as a fresh process per resolution (wall time); pi's in-process reload()
# time is reported too.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
. "$REPO/tests/oracle/env.sh"
[ "$PI_ORACLE_OK" = 1 ] || { echo "pi 1.6.0 not installed: run tests/oracle/install.sh" >&2; exit 2; }
DIR="${BENCH_DIR:-/tmp/pi-bench-resources}"
RUNS="${BENCH_RUNS:-30}"
PI_RUNS="${BENCH_PI_RUNS:-5}"

make_resources() { # ROOT PROJECT
	local root=$1 proj=$2 i
	mkdir -p "$root/home" "$root/agent"
	for i in $(seq 1 20); do mkdir -p "$proj/.pi/skills/p$i"; printf -- '---\nname: p%s\ndescription: project skill %s\n---\nbody\n' $i $i > "$proj/.pi/skills/p$i/SKILL.md"; done
	for i in $(seq 1 10); do mkdir -p "$proj/.agents/skills/a$i"; printf -- '---\ndescription: agents skill %s\n---\n' $i > "$proj/.agents/skills/a$i/SKILL.md"; done
	for i in $(seq 1 15); do mkdir -p "$root/agent/skills/u$i"; printf -- '---\ndescription: user skill %s\n---\n' $i > "$root/agent/skills/u$i/SKILL.md"; done
	for i in $(seq 1 5); do mkdir -p "$root/home/.agents/skills/h$i"; printf -- '---\ndescription: home skill %s\n---\n' $i > "$root/home/.agents/skills/h$i/SKILL.md"; done
	mkdir -p "$proj/.pi/prompts" "$root/agent/prompts"
	for i in $(seq 1 15); do printf -- '---\ndescription: t%s\nargument-hint: "[x]"\n---\nDo $1\n' $i > "$proj/.pi/prompts/t$i.md"; done
	for i in $(seq 16 30); do printf 'Template %s first line\n' $i > "$root/agent/prompts/t$i.md"; done
	echo "global" > "$root/agent/AGENTS.md"
}

build_trees() {
	local d
	if [ ! -d "$DIR/small" ]; then
		mkdir -p "$DIR/small/proj/.git"
		d="$DIR/small/proj"
		for i in $(seq 1 9); do echo "level $i" > "$d/AGENTS.md"; d="$d/l$i"; mkdir -p "$d"; done
		echo "cwd" > "$d/CLAUDE.md"
		make_resources "$DIR/small" "$d"
		echo "$d" > "$DIR/small/cwd"
	fi
	if [ ! -d "$DIR/repo" ]; then
		mkdir -p "$DIR/repo/proj/.git"
		make_resources "$DIR/repo" "$DIR/repo/proj"
		echo "repo rules" > "$DIR/repo/proj/AGENTS.md"
		python3 - "$DIR/repo/proj" <<'PY'
import os, sys
root = sys.argv[1]
n = 0
for a in range(100):
    for b in range(10):
        d = os.path.join(root, "src", f"m{a}", f"s{b}")
        os.makedirs(d, exist_ok=True)
        for c in range(100):
            with open(os.path.join(d, f"f{c}.rs"), "w") as f:
                f.write("fn x() {}\n")
            n += 1
print(f"{n} files", file=sys.stderr)
PY
		echo "$DIR/repo/proj" > "$DIR/repo/cwd"
	fi
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

time_ms() { # RUNS CMD...
	local n=$1; shift
	for _ in $(seq 1 "$n"); do
		local s e
		s=$(date +%s%N); "$@" >/dev/null 2>&1; e=$(date +%s%N)
		echo "scale=3; ($e - $s) / 1000000" | bc
	done | median
}

cargo build --release --quiet --bin pi-resources --manifest-path "$REPO/Cargo.toml"
BIN="${CARGO_TARGET_DIR:-$REPO/target}/release/pi-resources"
build_trees

printf '%-6s %8s %8s %10s %12s %8s\n' tree skills ours_ms pi_wall_ms pi_reload_ms ratio
for t in small repo; do
	root="$DIR/$t"; cwd=$(cat "$root/cwd")
	export HOME="$root/home" PI_CODING_AGENT_DIR="$root/agent" PI_OFFLINE=1
	ours_n=$("$BIN" --cwd "$cwd" -a --format jsonl | grep -c '"type":"skill"')
	pi_n=$("$NODE22" "$REPO/tests/oracle/resources/sdk-resources.mjs" --cwd "$cwd" --agent-dir "$root/agent" --trusted --no-extensions \
		| "$NODE22" -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).skills.length))')
	[ "$ours_n" = "$pi_n" ] || { echo "$t: skill counts differ: ours $ours_n, pi $pi_n" >&2; exit 1; }
	"$BIN" --cwd "$cwd" -a >/dev/null # warm
	ours=$(time_ms "$RUNS" "$BIN" --cwd "$cwd" -a --format jsonl)
	pi=$(time_ms "$PI_RUNS" "$NODE22" "$REPO/tests/oracle/resources/sdk-resources.mjs" --cwd "$cwd" --agent-dir "$root/agent" --trusted --no-extensions)
	reload=$(for _ in $(seq 1 "$PI_RUNS"); do "$NODE22" "$REPO/tests/oracle/resources/sdk-resources.mjs" --cwd "$cwd" --agent-dir "$root/agent" --trusted --no-extensions --time 2>&1 >/dev/null | sed -n 's/reload_ms=//p'; done | median)
	printf '%-6s %8s %8s %10s %12s %7.0fx\n' "$t" "$ours_n" "$ours" "$pi" "$reload" "$(echo "$pi / $ours" | bc -l)"
done
