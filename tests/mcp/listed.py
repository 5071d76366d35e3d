#!/usr/bin/env python3
"""A small MCP stdio server whose tools are listed in a file (stdlib only), for the reconnect tests.

usage: listed.py TOOLS_FILE [LOG]
Every `tools/list` answers one tool per whitespace-separated name in TOOLS_FILE (read at that
moment), so changing the file and reconnecting changes the tools. LOG, when given, gets a line
`start <pid>` when the process starts.
"""
import json
import os
import sys

tools_file = sys.argv[1]
if len(sys.argv) > 2:
    with open(sys.argv[2], "a") as f:
        f.write(f"start {os.getpid()}\n")
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m or "method" not in m:
        continue
    method = m["method"]
    if method == "initialize":
        r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
             "serverInfo": {"name": "listed", "version": "1"}}
    elif method == "tools/list":
        names = open(tools_file).read().split()
        r = {"tools": [{"name": n, "description": "Tool " + n + ".",
                        "inputSchema": {"type": "object", "properties": {}}} for n in names]}
    elif method == "tools/call":
        r = {"content": [{"type": "text", "text": "called " + m["params"]["name"]}]}
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"],
                          "error": {"code": -32601, "message": "Method not found: " + method}}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
