#!/usr/bin/env bash
# Installs Chromium from Debian's packages for the browser tests of the
# HTML session export (tests/integration/browser.rs). Idempotent.
#
#   * as root: `apt-get install chromium` (/usr/bin/chromium);
#   * otherwise: the chromium and chromium-common packages are downloaded
#     with `apt-get download` and unpacked into
#     ${PI_BROWSER_DIR:-$HOME/.cache/pi-toolkit-browser}/root (their library
#     dependencies must already be on the machine).
# Only Debian's package archive is contacted.
set -euo pipefail

if [ -n "${PI_CHROMIUM:-}" ] && [ -x "$PI_CHROMIUM" ]; then
	echo "chromium: $PI_CHROMIUM"
	exit 0
fi
if [ -x /usr/bin/chromium ]; then
	echo "chromium: /usr/bin/chromium ($(/usr/bin/chromium --version 2>/dev/null || echo '?'))"
	exit 0
fi
if [ "$(id -u)" = 0 ]; then
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends chromium >/dev/null
	echo "chromium: /usr/bin/chromium ($(/usr/bin/chromium --version 2>/dev/null || echo '?'))"
	exit 0
fi
DIR="${PI_BROWSER_DIR:-$HOME/.cache/pi-toolkit-browser}"
if [ -x "$DIR/root/usr/lib/chromium/chromium" ]; then
	echo "chromium: $DIR/root/usr/lib/chromium/chromium"
	exit 0
fi
mkdir -p "$DIR/debs" "$DIR/root"
(cd "$DIR/debs" && apt-get download chromium chromium-common)
for deb in "$DIR"/debs/*.deb; do
	dpkg-deb -x "$deb" "$DIR/root"
done
echo "chromium: $DIR/root/usr/lib/chromium/chromium"
