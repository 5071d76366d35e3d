#!/usr/bin/env bash
# The action's run step (action.yml): runs one task with
# `pi-run --no-approve --mode json` and writes the step outputs from the
# closing run_end record. Inputs come as PI_* variables (never spliced into
# the script, so a prompt cannot inject shell). It always exits 0 once the
# outputs are written: the action's last step fails with pi-run's code, after
# the session is uploaded.
#
# Files, in PI_RUN_OUT_DIR (default $RUNNER_TEMP/pi-run-<n>):
#   sessions/       the session file (--session-dir)
#   events.jsonl    pi-run's stdout: pi's events, then run_end
#   last-message    the final answer (--output-last-message), when it succeeded
set -uo pipefail
outputs=${GITHUB_OUTPUT:?GITHUB_OUTPUT is not set}
out=${PI_RUN_OUT_DIR:-}
if [ -z "$out" ]; then
	out=$(mktemp -d "${RUNNER_TEMP:-/tmp}/pi-run-XXXXXX") || exit 1
fi
mkdir -p "$out/sessions" || exit 1
args=(--no-approve --mode json --session-dir "$out/sessions" --output-last-message "$out/last-message")
[ -n "${PI_PROVIDER:-}" ] && args+=(--provider "$PI_PROVIDER")
[ -n "${PI_MODEL:-}" ] && args+=(--model "$PI_MODEL")
[ -n "${PI_SANDBOX:-}" ] && args+=(--sandbox "$PI_SANDBOX")
[ -n "${PI_MAX_COST:-}" ] && args+=(--max-cost "$PI_MAX_COST")
[ -n "${PI_TIMEOUT:-}" ] && args+=(--timeout "$PI_TIMEOUT")
[ -n "${PI_MAX_TURNS:-}" ] && args+=(--max-turns "$PI_MAX_TURNS")
[ -n "${PI_OUTPUT_SCHEMA:-}" ] && args+=(--output-schema "$PI_OUTPUT_SCHEMA")
[ -n "${PI_OUTPUT_RETRIES:-}" ] && args+=(--output-retries "$PI_OUTPUT_RETRIES")
[ -n "${PI_SESSION_ID:-}" ] && args+=(--session-id "$PI_SESSION_ID")
# PI_RUN_ARGS: extra flags, split on whitespace.
read -r -a extra <<<"${PI_RUN_ARGS:-}"
args+=("${extra[@]}")

pi-run "${args[@]}" -- "${PI_PROMPT:?PI_PROMPT is not set}" </dev/null >"$out/events.jsonl"
code=$?

run_end=$(tail -n 1 "$out/events.jsonl" | jq -c 'select(.type == "run_end")' 2>/dev/null)
field() { [ -n "$run_end" ] && jq -r "$1" <<<"$run_end"; }
cost=$(field '.usage.cost.total // 0')
stop=$(field '.stopReason // ""')
sid=$(field '.sessionId // ""')
sfile=$(field '.sessionFile // ""')
if [ -n "$run_end" ] && [ "$(jq -r 'has("output")' <<<"$run_end")" = true ]; then
	output=$(jq -c '.output' <<<"$run_end")
elif [ "$code" -eq 0 ] && [ -f "$out/last-message" ]; then
	output=$(cat "$out/last-message")
else
	output=
fi
[ -n "$sid" ] || sid=${PI_SESSION_ID:-$(basename "$out")}

# A multi-line value needs a delimiter that is not in it.
delim="pi_run_$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
{
	echo "exit-code=$code"
	echo "cost=${cost:-0}"
	echo "stop-reason=$stop"
	echo "session-id=$sid"
	echo "session-file=$sfile"
	echo "out-dir=$out"
	echo "run-end=$run_end"
	echo "output<<$delim"
	[ -z "$output" ] || printf '%s\n' "$output"
	echo "$delim"
} >>"$outputs"
echo "pi-run: exit $code, ${stop:-no run_end}, cost \$${cost:-0}, session ${sfile:-(none)}"
exit 0
