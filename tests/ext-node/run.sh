#!/usr/bin/env bash
# Installs what the Node-host tests need (the pi oracle, the pinned npm extensions) and runs them:
#   bash tests/ext-node/run.sh
# For .ci/run. Without network, the installs fail and so does this script.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bash "$HERE/../oracle/install.sh" >/dev/null
bash "$HERE/install.sh" >/dev/null
. "$HERE/../oracle/env.sh"
exec "$NODE22" --test "$HERE"/*.test.mjs
