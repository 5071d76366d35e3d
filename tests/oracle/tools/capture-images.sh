#!/usr/bin/env bash
# Regenerates tests/fixtures/pi-tools/read-images.json: the images that lib/tests/read_images.rs
# generates are read by the real pi 1.6.0 (through capture.mjs, one pi run per case), and pi's
# results are summarised (text blocks, image MIME type, encoded format, width, height).
#   bash tests/oracle/tools/capture-images.sh
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
bash "$ROOT/tests/oracle/install.sh" >/dev/null
. "$ROOT/tests/oracle/env.sh"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/pi-read-images.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
cd "$ROOT"
PI_READ_IMAGES_DUMP="$WORK" cargo test -q -p pi-lib --test read_images -- --ignored dump_cases_for_capture >&2
JOBS="${JOBS:-3}" "$NODE22" "$HERE/capture.mjs" "$WORK/cases.json" "$WORK/raw.json"
PI_READ_IMAGES_RAW="$WORK/raw.json" PI_READ_IMAGES_OUT="$ROOT/tests/fixtures/pi-tools/read-images.json" \
	cargo test -q -p pi-lib --test read_images -- --ignored summarise_capture >&2
