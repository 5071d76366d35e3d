#!/usr/bin/env bash
# Regenerates tests/fixtures/pi-tools/expected.json: runs every case of cases.json through the
# real pi 1.6.0 (tests/oracle/install.sh) with ripgrep and fd (Debian's ripgrep and fd-find,
# installed here if missing) in AGENT_DIR/bin, against the loopback mock LLM.
#   bash tests/oracle/tools/capture.sh [--only case,case]
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
bash "$ROOT/tests/oracle/install.sh" >/dev/null
. "$ROOT/tests/oracle/env.sh"
# pi 1.6.0 runs `rg` and `fd` from AGENT_DIR/bin; it passes fd flags (--no-require-git) that need
# fd >= 8.7, newer than Debian's, so fd is built from crates.io into the oracle dir.
if ! command -v rg >/dev/null; then
	apt-get update -qq && apt-get install -y -qq ripgrep >/dev/null
fi
FD="$PI_ORACLE_DIR/fd/bin/fd"
if [ ! -x "$FD" ]; then
	CARGO_TARGET_DIR="$PI_ORACLE_DIR/fd-build" cargo install fd-find --locked --root "$PI_ORACLE_DIR/fd" >&2
	rm -rf "$PI_ORACLE_DIR/fd-build"
fi
BIN="$(mktemp -d "${TMPDIR:-/tmp}/pi-tools-bin.XXXXXX")"
trap 'rm -rf "$BIN"' EXIT
ln -s "$(command -v rg)" "$BIN/rg"
ln -s "$FD" "$BIN/fd"
export PI_TOOLS_BIN="$BIN"
"$NODE22" "$HERE/capture.mjs" "$HERE/cases.json" "$ROOT/tests/fixtures/pi-tools/expected.json" "$@"
"$NODE22" "$HERE/capture.mjs" "$HERE/cases.json" /dev/null --definitions "$ROOT/tests/fixtures/pi-tools/definitions.json"
