#!/usr/bin/env bash
# Installs the real MCP servers the MCP tests run, pinned, into a cache dir OUTSIDE the repo:
#   ${PI_MCP_CACHE:-$HOME/.cache/pi-toolkit-mcp}/npm/node_modules/.bin/mcp-server-{everything,filesystem}
#   ${PI_MCP_CACHE:-$HOME/.cache/pi-toolkit-mcp}/npm/node_modules/@modelcontextprotocol/conformance
#   ${PI_MCP_CACHE:-$HOME/.cache/pi-toolkit-mcp}/py/bin/mcp-server-time
#
#   bash tests/mcp/install.sh        # idempotent; about 40 s the first time
#
# Only the npm registry and PyPI are contacted. Works non-interactively (CI=true).
set -euo pipefail

ROOT="${PI_MCP_CACHE:-$HOME/.cache/pi-toolkit-mcp}"
NPM="${NPM:-npm}"
PY="${PYTHON:-python3}"
export CI="${CI:-true}" npm_config_yes=true npm_config_fund=false npm_config_audit=false \
	npm_config_update_notifier=false npm_config_loglevel="${npm_config_loglevel:-error}"

EVERYTHING=2026.8.31
FILESYSTEM=2026.8.31
CONFORMANCE=0.1.16
TIME=2026.10.19
STAMP="everything=$EVERYTHING filesystem=$FILESYSTEM conformance=$CONFORMANCE time=$TIME"

mkdir -p "$ROOT"
if [ -f "$ROOT/stamp" ] && [ "$(cat "$ROOT/stamp")" = "$STAMP" ]; then
	echo "install.sh: MCP servers already present in $ROOT" >&2
	echo "$ROOT"
	exit 0
fi
command -v "$NPM" >/dev/null 2>&1 || { echo "install.sh: npm not found" >&2; exit 1; }
command -v "$PY" >/dev/null 2>&1 || { echo "install.sh: python3 not found" >&2; exit 1; }

rm -rf "$ROOT/npm" "$ROOT/py" "$ROOT/stamp"
mkdir -p "$ROOT/npm"
printf '{"private":true}\n' >"$ROOT/npm/package.json"
echo "install.sh: installing the npm MCP servers into $ROOT/npm" >&2
(cd "$ROOT/npm" && "$NPM" install --ignore-scripts --save-exact \
	"@modelcontextprotocol/server-everything@$EVERYTHING" \
	"@modelcontextprotocol/server-filesystem@$FILESYSTEM" \
	"@modelcontextprotocol/conformance@$CONFORMANCE" >"$ROOT/npm-install.log" 2>&1) || {
	echo "install.sh: npm install failed, see $ROOT/npm-install.log" >&2
	tail -20 "$ROOT/npm-install.log" >&2
	exit 1
}
echo "install.sh: installing mcp-server-time==$TIME into $ROOT/py" >&2
"$PY" -m venv "$ROOT/py"
"$ROOT/py/bin/pip" install --quiet --disable-pip-version-check "mcp-server-time==$TIME" >"$ROOT/pip-install.log" 2>&1 || {
	echo "install.sh: pip install failed, see $ROOT/pip-install.log" >&2
	tail -20 "$ROOT/pip-install.log" >&2
	exit 1
}
echo "$STAMP" >"$ROOT/stamp"
echo "$ROOT"
