#!/usr/bin/env bash
# The action's install step (action.yml): puts pi-run and pi-session on
# PATH for the steps after it. PI_INSTALL says how:
#   source  cargo install from the action's own checkout (PI_ACTION_PATH)
#   none    they are already on PATH
#   URL     a release archive (.tar.gz) holding the two binaries
set -euo pipefail
mode=${PI_INSTALL:-source}
root="${RUNNER_TOOL_CACHE:-${RUNNER_TEMP:-/tmp}}/pi-toolkit"
case "$mode" in
none)
	command -v pi-run >/dev/null || {
		echo "::error title=pi-run::install: none, but pi-run is not on PATH"
		exit 1
	}
	;;
source)
	: "${PI_ACTION_PATH:?PI_ACTION_PATH is not set}"
	cargo install --locked --root "$root" --path "$PI_ACTION_PATH" --bin pi-run --bin pi-session
	echo "$root/bin" >>"${GITHUB_PATH:?GITHUB_PATH is not set}"
	;;
http://* | https://*)
	mkdir -p "$root/bin"
	archive="$root/release.tar.gz"
	curl --fail --location --silent --show-error --retry 3 -o "$archive" "$mode"
	tar -xzf "$archive" -C "$root/bin"
	for b in pi-run pi-session; do
		found=$(find "$root/bin" -type f -name "$b" | head -n1)
		[ -n "$found" ] || {
			echo "::error title=pi-run::install: $mode holds no $b binary"
			exit 1
		}
		[ "$found" = "$root/bin/$b" ] || mv "$found" "$root/bin/$b"
		chmod +x "$root/bin/$b"
	done
	echo "$root/bin" >>"${GITHUB_PATH:?GITHUB_PATH is not set}"
	;;
*)
	echo "::error title=pi-run::install must be source, none or a release URL, not '$mode'"
	exit 2
	;;
esac
