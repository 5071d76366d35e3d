#!/usr/bin/env bash
# Makes jq available to the tests (the README's first example and other
# runnable docs examples pipe JSONL through it; examples/guard.sh needs it).
# Idempotent.
#
#   * jq already on PATH: nothing to do;
#   * as root: `apt-get install jq`;
#   * otherwise: the jq, libjq1 and libonig5 packages are downloaded with
#     `apt-get download` and unpacked into
#     ${PI_TOOLS_DIR:-$HOME/.cache/pi-toolkit-tools}/root, and
#     .../bin/jq runs that jq with its libraries (the tests put .../bin on
#     PATH; tests/integration/common.rs, tools_path).
# Only Debian's package archive is contacted.
set -euo pipefail

DIR="${PI_TOOLS_DIR:-$HOME/.cache/pi-toolkit-tools}"
if command -v jq >/dev/null 2>&1; then
	echo "jq: $(command -v jq) ($(jq --version 2>/dev/null || echo '?'))"
	exit 0
fi
if [ -x "$DIR/bin/jq" ]; then
	echo "jq: $DIR/bin/jq"
	exit 0
fi
if [ "$(id -u)" = 0 ]; then
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends jq >/dev/null
	echo "jq: $(command -v jq)"
	exit 0
fi
mkdir -p "$DIR/debs" "$DIR/root" "$DIR/bin"
(cd "$DIR/debs" && apt-get download jq libjq1 libonig5)
for deb in "$DIR"/debs/*.deb; do
	dpkg-deb -x "$deb" "$DIR/root"
done
libs=$(dirname "$(find "$DIR/root" -name 'libjq.so*' | head -n1)")
cat >"$DIR/bin/jq" <<WRAP
#!/bin/sh
LD_LIBRARY_PATH="$libs\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$DIR/root/usr/bin/jq" "\$@"
WRAP
chmod +x "$DIR/bin/jq"
"$DIR/bin/jq" --version
echo "jq: $DIR/bin/jq"
