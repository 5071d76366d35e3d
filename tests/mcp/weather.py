#!/usr/bin/env python3
"""The MCP stdio server of RPC capture 10 (stdlib only): the answers its
wire log shows. usage: weather.py NAME [LOG]
  initialize  serverInfo {name: NAME, version: "0.1"}, tools, two-line instructions
  tools/list  get-weather (read-only) and delete_all
  tools/call  get-weather -> "weather in <city>: sunny"
LOG: every JSON-RPC message in or out is appended there as
{"srv": NAME, "dir": "in"|"out", "msg": ...} (the capture's .wire.jsonl shape).
"""
import json
import sys

name = sys.argv[1] if len(sys.argv) > 1 else "wx"
log = sys.argv[2] if len(sys.argv) > 2 else None

TOOLS = [
    {"name": "get-weather", "description": "Get weather for a city",
     "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
     "annotations": {"readOnlyHint": True}},
    {"name": "delete_all", "description": "Delete everything",
     "inputSchema": {"type": "object", "properties": {}}},
]


def record(direction, msg):
    if log:
        with open(log, "a") as f:
            f.write(json.dumps({"srv": name, "dir": direction, "msg": msg}) + "\n")


def send(msg):
    record("out", msg)
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    record("in", msg)
    method = msg.get("method")
    mid = msg.get("id")
    if mid is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "protocolVersion": msg.get("params", {}).get("protocolVersion", "2025-11-25"),
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": name, "version": "0.1"},
            "instructions": "Weather tools for testing.\nSecond line ignored."}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        p = msg.get("params", {})
        if p.get("name") == "get-weather":
            city = p.get("arguments", {}).get("city", "?")
            result = {"content": [{"type": "text", "text": "weather in %s: sunny" % city}], "isError": False}
        else:
            result = {"content": [{"type": "text", "text": "refused"}], "isError": True}
        send({"jsonrpc": "2.0", "id": mid, "result": result})
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": mid, "result": {}})
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "Method not found"}})
