#!/usr/bin/env bash
# Runs the libFuzzer targets outside CI (stable toolchain, RUSTC_BOOTSTRAP=1):
#
#   bash fuzz/run.sh [RUNS] [TARGET...]     # default: 1000000 runs, every target
#
# Each target starts from its committed seeds (fuzz/corpus/<target>, plus
# pi's session fixtures and shared/golden-sse when present) and grows a
# scratch corpus in fuzz/corpus-run/<target> (ignored by git). At the end
# a covering set of everything seen replaces the generated files in
# fuzz/corpus/<target> (the hand-written, named seeds stay);
# crashes land in fuzz/artifacts/<target>/ — minimise one with
# `cargo fuzz tmin`, copy it to fuzz/regressions/<target>/ (the property
# tests replay that folder) and fix the code. One summary line per target
# (executions, seconds, result) is printed and appended to fuzz/runs.log.
set -euo pipefail
cd "$(dirname "$0")"
RUNS=${1:-1000000}
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(session sse partial_json template frontmatter models_json settings_json)
export RUSTC_BOOTSTRAP=1
cargo fuzz build -O -s none "${TARGETS[@]/#/}" >/dev/null 2>&1 || cargo fuzz build -O -s none
shared=""
for s in ../../shared ../../../shared; do [ -d "$s/golden-sse" ] && shared="$s/golden-sse" && break; done
for t in "${TARGETS[@]}"; do
	mkdir -p "corpus-run/$t" "artifacts/$t" "corpus/$t"
	extra=("corpus/$t")
	case $t in
	session) extra+=(../tests/fixtures/pi-sessions/sessions) ;;
	sse) [ -n "$shared" ] && extra+=("$shared") ;;
	esac
	[ -d "regressions/$t" ] && extra+=("regressions/$t")
	log="artifacts/$t/run.log"
	start=$(date +%s)
	set +e
	cargo fuzz run -O -s none "$t" "corpus-run/$t" "${extra[@]}" -- \
		-runs="$RUNS" -max_len=4096 -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
		-artifact_prefix="artifacts/$t/" -print_final_stats=1 >"$log" 2>&1
	rc=$?
	set -e
	secs=$(($(date +%s) - start))
	execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
	result=$([ $rc -eq 0 ] && echo "0 crashes" || echo "FAILED (rc $rc, see $log)")
	line="$(date -u +%F) $t: $execs executions in ${secs}s, $result"
	echo "$line" | tee -a runs.log
	if [ $rc -eq 0 ]; then
		# Keep a small covering set: named seeds stay, the 40-hex-named
		# files are replaced by libFuzzer's set cover of everything seen.
		cover=$(mktemp -d)
		if cargo fuzz run -O -s none "$t" "$cover" "corpus/$t" "corpus-run/$t" -- -set_cover_merge=1 >/dev/null 2>&1; then
			find "corpus/$t" -type f -regextype posix-extended -regex '.*/[0-9a-f]{40}' -delete
			cp "$cover"/* "corpus/$t/" 2>/dev/null || true
		fi
		rm -rf "$cover"
	fi
done
