#!/usr/bin/env bash
# The MCP client under test for `@modelcontextprotocol/conformance client`: it is run as
#   conformance-client.sh PI_RUN PI_RESOURCES SERVER_URL
# (the harness appends the URL) with MCP_CONFORMANCE_SCENARIO naming the scenario. It writes an
# mcp.json for the URL into a temp agent dir; `initialize` is `pi-resources --inspect` (connect,
# list tools, close); `tools_call` and `sse-retry` are a `pi-run` with the faux provider whose
# script calls the scenario's tool once.
set -euo pipefail
run="$1" res="$2" url="${*: -1}"
d="$(mktemp -d "${TMPDIR:-/tmp}/pi-mcp-conf.XXXXXX")"
trap 'rm -rf "$d"' EXIT
mkdir -p "$d/agent" "$d/cwd" "$d/home"
printf '{"mcpServers":{"c":{"url":"%s","exposure":"direct","timeout":20}}}\n' "$url" >"$d/agent/mcp.json"
case "${MCP_CONFORMANCE_SCENARIO:-initialize}" in
tools_call) tool=add_numbers args='{"a":2,"b":3}' ;;
sse-retry) tool=test_reconnection args='{}' ;;
*) tool= args= ;;
esac
export HOME="$d/home" PI_CODING_AGENT_DIR="$d/agent"
if [ -z "$tool" ]; then
	"$res" --cwd "$d/cwd" --inspect --format jsonl
	exit
fi
printf '{"toolCalls":[{"name":"mcp__c__%s","arguments":%s,"id":"c1"}]}\n{"text":"done"}\n' "$tool" "$args" >"$d/script.jsonl"
cd "$d/cwd"
"$run" --no-session --provider faux --model "$d/script.jsonl" --mode json go
