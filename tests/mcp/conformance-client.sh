#!/usr/bin/env bash
# The MCP client under test for `@modelcontextprotocol/conformance client`: it is run as
#   conformance-client.sh PI_RUN PI_RESOURCES SERVER_URL
# (the harness appends the URL) with MCP_CONFORMANCE_SCENARIO naming the scenario. It writes an
# mcp.json for the URL into a temp agent dir; `initialize` is `pi-resources --inspect` (connect,
# list tools, close); `tools_call`, `sse-retry` and `elicitation-sep1034-client-defaults` are a
# `pi-run` with the faux provider whose script calls the scenario's tool once. `auth/*` is
# `pi-resources mcp login c` (the "browser" is an xdg-open on PATH that fetches the
# authorization URL with curl and follows its redirect to the loopback callback), then
# `pi-resources --inspect` with the stored token. MCP_CONFORMANCE_CONTEXT's client_id and
# client_secret (pre-registration) become the entry's `oauth.clientId`/`clientSecret`.
# Per scenario: basic-cimd gives `oauth.clientMetadataUrl` (the document URL the suite's
# authorization server expects; a real client hosts its document there); client-credentials-*
# set `oauth.grantType: "client_credentials"` (the jwt variant's key as `oauth.privateKey`) and only connect (the token is fetched at
# connect, no browser); cross-app-access-* sets `oauth.grantType: "enterprise"` with the
# IdP of the context as `oauth.idp` and only connects; scope-step-up signs in, calls the server's tool (403
# insufficient_scope: the wider scope is noted), signs in again and calls it again.
# elicitation-sep1034-client-defaults opts the entry in to our `"elicitation": "defaults"` (pi's
# default, and ours, offers no elicitation).
set -euo pipefail
run="$1" res="$2" url="${*: -1}"
d="$(mktemp -d "${TMPDIR:-/tmp}/pi-mcp-conf.XXXXXX")"
trap 'rm -rf "$d"' EXIT
mkdir -p "$d/agent" "$d/cwd" "$d/home" "$d/bin"
scenario="${MCP_CONFORMANCE_SCENARIO:-initialize}"
oauth='{}'
if [ -n "${MCP_CONFORMANCE_CONTEXT:-}" ]; then
	oauth="$(printf '%s' "$MCP_CONFORMANCE_CONTEXT" | python3 -c '
import json, sys
c = json.load(sys.stdin)
o = {}
if "client_id" in c: o["clientId"] = c["client_id"]
if "client_secret" in c: o["clientSecret"] = c["client_secret"]
if "private_key_pem" in c: o["privateKey"] = c["private_key_pem"]
if "signing_algorithm" in c: o["signingAlgorithm"] = c["signing_algorithm"]
if "idp_id_token" in c:
	o["grantType"] = "enterprise"
	o["idp"] = {"tokenEndpoint": c["idp_token_endpoint"], "clientId": c["idp_client_id"], "idToken": c["idp_id_token"]}
print(json.dumps(o))')"
fi
case "$scenario" in
auth/basic-cimd) oauth='{"clientMetadataUrl":"https://conformance-test.local/client-metadata.json"}' ;;
auth/client-credentials-*) oauth="${oauth%\}},\"grantType\":\"client_credentials\"}" ;;
esac
elicitation=none
[ "$scenario" = elicitation-sep1034-client-defaults ] && elicitation=defaults
printf '{"mcpServers":{"c":{"url":"%s","exposure":"direct","timeout":20,"oauth":%s,"elicitation":"%s"}}}\n' "$url" "$oauth" "$elicitation" >"$d/agent/mcp.json"
case "$scenario" in
tools_call) tool=add_numbers args='{"a":2,"b":3}' ;;
sse-retry) tool=test_reconnection args='{}' ;;
elicitation-sep1034-client-defaults) tool=test_client_elicitation_defaults args='{}' ;;
*) tool= args= ;;
esac
export HOME="$d/home" PI_CODING_AGENT_DIR="$d/agent"
case "$scenario" in
auth/client-credentials-* | auth/cross-app-access-*)
	"$res" --cwd "$d/cwd" --inspect --format jsonl
	exit
	;;
auth/*)
	printf '#!/bin/sh\nexec curl -s -o /dev/null -L --max-time 20 "$1"\n' >"$d/bin/xdg-open"
	chmod +x "$d/bin/xdg-open"
	PATH="$d/bin:$PATH" "$res" --cwd "$d/cwd" mcp login c --timeout 25
	"$res" --cwd "$d/cwd" --inspect --format jsonl
	if [ "$scenario" = auth/scope-step-up ]; then
		printf '{"toolCalls":[{"name":"mcp__c__test_tool","arguments":{},"id":"c1"}]}\n{"text":"done"}\n' >"$d/script.jsonl"
		(cd "$d/cwd" && "$run" --no-session --provider faux --model "$d/script.jsonl" --mode json go >"$d/run1.jsonl")
		PATH="$d/bin:$PATH" "$res" --cwd "$d/cwd" mcp login c --timeout 25
		(cd "$d/cwd" && "$run" --no-session --provider faux --model "$d/script.jsonl" --mode json go >"$d/run2.jsonl")
		cat "$d/run1.jsonl" "$d/run2.jsonl" >"${PI_CONF_DEBUG:-/dev/null}"
	fi
	exit
	;;
esac
if [ -z "$tool" ]; then
	"$res" --cwd "$d/cwd" --inspect --format jsonl
	exit
fi
printf '{"toolCalls":[{"name":"mcp__c__%s","arguments":%s,"id":"c1"}]}\n{"text":"done"}\n' "$tool" "$args" >"$d/script.jsonl"
cd "$d/cwd"
"$run" --no-session --provider faux --model "$d/script.jsonl" --mode json go
