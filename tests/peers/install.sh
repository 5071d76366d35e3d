#!/usr/bin/env bash
# Installs the third-party mock LLM servers the provider tests run against
# (llmock and fakellm, from PyPI, pinned) into a venv outside the repo:
# ${PI_PEERS_DIR:-$HOME/.cache/pi-toolkit-peers}. Idempotent: a venv that
# already has the pinned versions is left alone.
set -euo pipefail
DIR="${PI_PEERS_DIR:-$HOME/.cache/pi-toolkit-peers}"
PINS=(fakellm==0.3.5 llmock==0.2.2)
VENV="$DIR/venv"
stamp="$DIR/installed.txt"
want="${PINS[*]}"
if [ -x "$VENV/bin/llmock" ] && [ -x "$VENV/bin/fakellm" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
	exit 0
fi
PY="${PYTHON:-python3}"
if ! command -v "$PY" >/dev/null 2>&1; then
	echo "tests/peers/install.sh: $PY not found (needed for llmock/fakellm)" >&2
	exit 1
fi
mkdir -p "$DIR"
rm -rf "$VENV" "$stamp"
"$PY" -m venv "$VENV"
"$VENV/bin/pip" install --quiet --disable-pip-version-check "${PINS[@]}"
echo "$want" >"$stamp"
echo "tests/peers/install.sh: installed ${PINS[*]} into $VENV" >&2
