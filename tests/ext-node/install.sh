#!/usr/bin/env bash
# Install the real npm pi extensions the Node-host tests load, pinned, into a cache dir OUTSIDE
# the repo: ${PI_EXT_CACHE:-$HOME/.cache/pi-toolkit-ext}/<sub>/node_modules/<pkg>.
#
#   bash tests/ext-node/install.sh        # idempotent; about a minute the first time
#
# Peer dependencies on @earendil-works/pi-* are NOT installed (--legacy-peer-deps): the toolkit's
# Node host provides those modules itself, and the tests check that the extensions load without
# them. pi 1.6.0 (the oracle, tests/oracle/install.sh) loads the same folders for the comparison.
# When a lockfile is committed in tests/ext-node/npm/<sub>/ it is used (`npm ci`).
# Only the npm registry is contacted. Works non-interactively (CI=true).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="${PI_EXT_CACHE:-$HOME/.cache/pi-toolkit-ext}"
NPM="${NPM:-npm}"
export CI="${CI:-true}" npm_config_yes=true npm_config_fund=false npm_config_audit=false \
	npm_config_update_notifier=false npm_config_loglevel="${npm_config_loglevel:-error}" \
	npm_config_legacy_peer_deps=true

if ! command -v "$NPM" >/dev/null 2>&1; then
	echo "install.sh: npm not found" >&2
	exit 1
fi
mkdir -p "$ROOT"

# sub  package  version
PACKAGES='
tintinweb-subagents @tintinweb/pi-subagents 0.14.1
pi-subagents pi-subagents 0.67.0
pi-mcp-adapter pi-mcp-adapter 2.36.0
pi-web-access pi-web-access 0.28.0
'

installed_version() { # dir pkg
	local pj="$1/node_modules/$2/package.json"
	[ -f "$pj" ] || return 0
	sed -n 's/^[[:space:]]*"version":[[:space:]]*"\([^"]*\)".*/\1/p' "$pj" | head -1
}

echo "$PACKAGES" | while read -r sub pkg ver; do
	[ -n "$sub" ] || continue
	dir="$ROOT/$sub"
	if [ "$(installed_version "$dir" "$pkg")" = "$ver" ]; then
		echo "install.sh: $pkg@$ver already present" >&2
		continue
	fi
	echo "install.sh: installing $pkg@$ver into $dir" >&2
	rm -rf "$dir"
	mkdir -p "$dir"
	if [ -f "$HERE/npm/$sub/package-lock.json" ]; then
		cp "$HERE/npm/$sub/package.json" "$HERE/npm/$sub/package-lock.json" "$dir/"
		(cd "$dir" && "$NPM" ci --ignore-scripts >"$dir/install.log" 2>&1) || {
			echo "install.sh: npm ci failed for $sub, see $dir/install.log" >&2
			tail -20 "$dir/install.log" >&2
			exit 1
		}
	else
		printf '{"private":true,"dependencies":{"%s":"%s"}}\n' "$pkg" "$ver" >"$dir/package.json"
		(cd "$dir" && "$NPM" install --ignore-scripts --save-exact "$pkg@$ver" >"$dir/install.log" 2>&1) || {
			echo "install.sh: npm install failed for $sub, see $dir/install.log" >&2
			tail -20 "$dir/install.log" >&2
			exit 1
		}
	fi
done
echo "$ROOT"
