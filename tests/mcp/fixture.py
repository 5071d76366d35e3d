#!/usr/bin/env python3
"""A small MCP stdio server for the pi-run tests (stdlib only).

usage: fixture.py MODE [MARKER]
  ok           tools add/fail/big, a resource, instructions
  exit         exits at start, before any reply
  hang         never answers initialize
  rpcerror     tools/call answers a JSON-RPC error
  die          exits in the middle of tools/call
  roots        asks the client for roots/list and writes the answer to MARKER
  elicit       also tools "ask" (sends elicitation/create, a form whose fields have defaults) and
               "sample" (sends sampling/createMessage); each returns the client's answer as its
               text; the initialize capabilities go to MARKER
  slow         also tools "progress" (three notifications/progress, then "finished") and
               "wait" (never answers; a notifications/cancelled for it is appended to MARKER)
MARKER: a file created at start (trust tests). When MARKER.hold exists the server records
{"held": <pid>} in MARKER and never answers initialize (cache tests).
"""
import json
import os
import sys
import time

mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
if len(sys.argv) > 2:
    open(sys.argv[2], "w").write("started\n")
    if os.path.exists(sys.argv[2] + ".hold"):
        with open(sys.argv[2], "a") as f:
            f.write(json.dumps({"held": os.getpid()}) + "\n")
        mode = "hang"
if mode == "exit":
    sys.stderr.write("fixture: refusing to start\n")
    sys.exit(3)

TOOLS = [
    {"name": "add", "description": "Add two integers.",
     "inputSchema": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                     "required": ["a", "b"]}},
    {"name": "fail", "description": "Always fails.",
     "inputSchema": {"type": "object", "properties": {"msg": {"type": "string"}}}},
    {"name": "big-text", "description": "Returns N characters.",
     "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}}},
]
if mode == "elicit":
    TOOLS += [
        {"name": "ask", "description": "Asks the user to fill in a form.",
         "inputSchema": {"type": "object", "properties": {}}},
        {"name": "sample", "description": "Asks the client's model.",
         "inputSchema": {"type": "object", "properties": {}}},
    ]
ELICIT_SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string", "description": "User name", "default": "John Doe"},
    "age": {"type": "integer", "description": "User age", "default": 30},
    "score": {"type": "number", "description": "User score", "default": 95.5},
    "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"],
               "default": "active"},
    "verified": {"type": "boolean", "description": "Verification status", "default": True},
    "note": {"type": "string", "description": "No default"}}, "required": []}
pending = {}  # our request id -> the tools/call id waiting for its answer
if mode == "slow":
    TOOLS += [
        {"name": "progress", "description": "Reports progress three times, then finishes.",
         "inputSchema": {"type": "object", "properties": {}}},
        {"name": "wait", "description": "Waits until cancelled.",
         "inputSchema": {"type": "object", "properties": {}}},
    ]


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    method, mid = msg.get("method"), msg.get("id")
    if method == "notifications/initialized" and mode == "roots":
        send({"jsonrpc": "2.0", "id": "roots-1", "method": "roots/list"})
    if method is None and mid == "roots-1" and len(sys.argv) > 2:
        open(sys.argv[2], "w").write(json.dumps(msg) + "\n")
    if method is None and mid in pending:
        answer = msg["result"] if "result" in msg else {"error": msg.get("error")}
        send({"jsonrpc": "2.0", "id": pending.pop(mid), "result": {
            "content": [{"type": "text", "text": json.dumps(answer, sort_keys=True)}]}})
        continue
    if method == "notifications/cancelled" and len(sys.argv) > 2:
        with open(sys.argv[2], "a") as f:
            f.write(json.dumps(msg) + "\n")
    if mid is None or method is None:
        continue
    if method == "initialize":
        if mode == "hang":
            continue
        if mode == "elicit" and len(sys.argv) > 2:
            with open(sys.argv[2], "a") as f:
                f.write(json.dumps({"capabilities": msg["params"].get("capabilities")}) + "\n")
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "protocolVersion": msg["params"].get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}, "resources": {}},
            "serverInfo": {"name": "fixture", "version": "1"},
            "instructions": "Fixture tools for testing.\nSecond line."}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        name = msg["params"]["name"]
        args = msg["params"].get("arguments") or {}
        if mode == "rpcerror":
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32602, "message": "Unknown tool: " + name}})
        elif mode == "die":
            sys.exit(4)
        elif name == "progress":
            token = (msg["params"].get("_meta") or {}).get("progressToken")
            # With total and message, progress alone, total without message.
            steps = [{"progress": 1, "total": 3, "message": "step 1 of 3"}, {"progress": 2},
                     {"progress": 3, "total": 3}]
            for p in steps:
                if token is not None:
                    send({"jsonrpc": "2.0", "method": "notifications/progress",
                          "params": dict(p, progressToken=token)})
                time.sleep(0.05)
            send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": "finished"}]}})
        elif name == "ask":
            pending["elicit-1"] = mid
            send({"jsonrpc": "2.0", "id": "elicit-1", "method": "elicitation/create", "params": {
                "mode": "form", "message": "Please review and update the form fields with defaults",
                "requestedSchema": ELICIT_SCHEMA}})
        elif name == "sample":
            pending["sample-1"] = mid
            send({"jsonrpc": "2.0", "id": "sample-1", "method": "sampling/createMessage", "params": {
                "messages": [{"role": "user", "content": {"type": "text", "text": "Say hi"}}],
                "maxTokens": 10}})
        elif name == "wait":
            if len(sys.argv) > 2:
                with open(sys.argv[2], "a") as f:
                    f.write(json.dumps({"waiting": mid}) + "\n")
        elif name == "add":
            s = args.get("a", 0) + args.get("b", 0)
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "content": [{"type": "text", "text": str(s)}], "structuredContent": {"result": s}, "isError": False}})
        elif name == "fail":
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "content": [{"type": "text", "text": "failed: " + str(args.get("msg", ""))}], "isError": True}})
        elif name == "big-text":
            n = int(args.get("n", 30000))
            text = "".join(chr(ord("a") + i % 26) for i in range(n))
            send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": text}]}})
        else:
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32602, "message": "Unknown tool: " + name}})
    elif method == "resources/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"resources": [
            {"uri": "fixture://hello", "name": "hello", "mimeType": "text/plain"}]}})
    elif method == "resources/templates/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"resourceTemplates": []}})
    elif method == "resources/read":
        send({"jsonrpc": "2.0", "id": mid, "result": {"contents": [
            {"uri": msg["params"]["uri"], "mimeType": "text/plain", "text": "hello resource"}]}})
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": mid, "result": {}})
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "Method not found"}})
