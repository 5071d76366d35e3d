#!/usr/bin/env bash
# A CI job written for `pi -p`: one run per row of pi 1.6.0's non-interactive
# flags, each `$PI -p --offline --mode json --no-approve <flags> "say ok"`,
# checking that it exits 0 and prints a JSON event stream that starts with
# the session header and ends the run (`agent_end`). Run it unchanged with
# the real pi or with pi-run:
#
#   PI="pi" bash tests/ci/pi-flags.sh
#   PI="target/debug/pi-run" bash tests/ci/pi-flags.sh
#
# $PI may be several words (it is word-split). The model comes from the
# agent dir's settings.json (PI_CODING_AGENT_DIR). Runs in the current
# directory, which it fills with a few files (an extension, a skill, a
# template, an instructions file). Prints `ok: <flags>` or `FAIL: <flags>`
# per row; exits 1 if any row failed.
set -u
fail=0
err=$(mktemp)
trap 'rm -f "$err"' EXIT

printf 'export default function (pi) {}\n' > ext.ts
mkdir -p skills/demo prompts
printf -- '---\nname: demo\ndescription: A demo skill\n---\nSteps.\n' > skills/demo/SKILL.md
printf 'Review %s\n' '$1' > prompts/review.md
printf 'Answer briefly.\n' > instructions.md

check() { # label, then the command
	local label=$1
	shift
	local out rc
	out=$("$@" < /dev/null 2> "$err")
	rc=$?
	if [ $rc -eq 0 ] \
		&& printf '%s\n' "$out" | head -n 1 | grep -q '"type":"session"' \
		&& printf '%s\n' "$out" | grep -q '"type":"agent_end"'; then
		echo "ok: $label"
	else
		echo "FAIL (exit $rc): $label"
		sed 's/^/    /' "$err"
		fail=1
	fi
}

run() { # flags...
	# shellcheck disable=SC2086
	check "$*" $PI -p --offline --mode json --no-approve "$@" "say ok"
}

run
run --print
run --provider mock --model mock-model
run --model mock/mock-model --api-key test-key
run --models 'mock*'
run --models mock-model,other --thinking low
run --thinking off
run --tools read,grep
run -t 'gr*,read'
run --tools +grep,-bash
run --tools -bash
run --exclude-tools 'b*'
run -xt edit,write
run --no-tools
run -nt -t +ls
run --no-builtin-tools
run -nbt
run -e ./ext.ts
run --extension ./ext.ts --no-extensions
run -ne
run --skill ./skills
run -ns
run --no-skills --skill ./skills/demo
run --prompt-template ./prompts
run -np
run --no-prompt-templates
run --theme ./no-such-theme.json
run --no-themes
run -nc
run --no-context-files
run --system-prompt 'You are terse.'
run --append-system-prompt ./instructions.md
run --append-system-prompt 'One more rule.' --append-system-prompt 'And another.'
run --no-mcp
run --verbose
run --offline
run -a
run --approve
run -na
run --name 'CI run'
run -n 'CI run 2'
run --session-id ci-run-1
run --session-id ci-run-1
run --continue
run -c
run --no-session
run --session-dir ./ci-sessions
run --session ./ci-session.jsonl
run --session ./ci-session.jsonl
latest=$(ls -t ./ci-sessions/*.jsonl | head -n 1)
run --fork "$latest"
run --fork "$latest" --session-id ci-fork-1
run -- 'a message starting with words'

# Commands that exit before a run.
# shellcheck disable=SC2086
if $PI --version > /dev/null 2> "$err" && $PI -v > /dev/null 2>> "$err"; then
	echo "ok: --version, -v"
else
	echo "FAIL: --version, -v"
	fail=1
fi
# shellcheck disable=SC2086
if $PI --list-models mock > /dev/null 2> "$err"; then
	echo "ok: --list-models mock"
else
	echo "FAIL: --list-models mock"
	fail=1
fi
# shellcheck disable=SC2086
if $PI --export ./ci-session.jsonl ./ci-session.html > /dev/null 2> "$err" && [ -s ci-session.html ]; then
	echo "ok: --export"
else
	echo "FAIL: --export"
	sed 's/^/    /' "$err"
	fail=1
fi
exit $fail
