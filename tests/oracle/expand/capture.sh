#!/usr/bin/env bash
# Regenerates tests/fixtures/expand/cases.json from the real pi 1.6.0 (black box, offline):
#   bash tests/oracle/install.sh && bash tests/oracle/expand/capture.sh [IN.json] [OUT.json]
# The cases are defined in cases.in.json next to this script; capture.mjs runs each one in a
# scratch project against the loopback mock LLM. About 1 s per case.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$HERE/../env.sh"
if [ "$PI_ORACLE_OK" != 1 ]; then
	echo "capture.sh: pi oracle not installed; run tests/oracle/install.sh" >&2
	exit 2
fi
IN="${1:-$HERE/cases.in.json}"
OUT="${2:-$HERE/../../fixtures/expand/cases.json}"
mkdir -p "$(dirname "$OUT")"
exec "$NODE22" "$HERE/capture.mjs" --in "$IN" --out "$OUT" --pi "$PI160" --mock "$HERE/../mock-llm.mjs"
