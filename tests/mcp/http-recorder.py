#!/usr/bin/env python3
"""A loopback streamable HTTP MCP server that records what clients send.

    http-recorder.py PORT_FILE LOG_FILE [TOKEN]

Listens on 127.0.0.1 on a free port and writes the port to PORT_FILE once it
listens. Every HTTP request is one JSON line in LOG_FILE:
{"method", "headers": {lower-case name: value}, "rpc": <JSON-RPC method or null>}.
It answers `initialize` (with an Mcp-Session-Id), notifications (202),
`tools/list` (one tool, `whoami`) and `tools/call whoami` (the text is the
request's Authorization header, or "none"). With TOKEN, a request whose
Authorization is not `Bearer TOKEN` gets 401 with a `WWW-Authenticate: Bearer`
challenge. GET is 405 (no server-sent stream); DELETE ends the session (200).
"""

import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

port_file, log_file = sys.argv[1], sys.argv[2]
token = sys.argv[3] if len(sys.argv) > 3 else None
lock = threading.Lock()


def log(handler, rpc):
    rec = {
        "method": handler.command,
        "headers": {k.lower(): v for k, v in handler.headers.items()},
        "rpc": rpc,
    }
    with lock, open(log_file, "a") as f:
        f.write(json.dumps(rec) + "\n")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body=None, headers=()):
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        if body is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def authorized(self):
        if token is None or self.headers.get("Authorization") == f"Bearer {token}":
            return True
        self.reply(401, {"error": "unauthorized"}, [("WWW-Authenticate", 'Bearer realm="mcp"')])
        return False

    def do_GET(self):
        log(self, None)
        self.reply(405)

    def do_DELETE(self):
        log(self, None)
        self.reply(200)

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        try:
            msg = json.loads(self.rfile.read(length) or b"null")
        except ValueError:
            msg = None
        method = msg.get("method") if isinstance(msg, dict) else None
        log(self, method)
        if not self.authorized():
            return
        if not isinstance(msg, dict) or "id" not in msg:
            self.reply(202)
            return
        mid = msg["id"]
        if method == "initialize":
            version = (msg.get("params") or {}).get("protocolVersion", "2025-06-18")
            result = {
                "protocolVersion": version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "http-recorder", "version": "1"},
            }
            self.reply(200, {"jsonrpc": "2.0", "id": mid, "result": result},
                       [("Mcp-Session-Id", "s1")])
        elif method == "tools/list":
            tool = {"name": "whoami", "description": "The Authorization header it got",
                    "inputSchema": {"type": "object", "properties": {}}}
            self.reply(200, {"jsonrpc": "2.0", "id": mid, "result": {"tools": [tool]}})
        elif method == "tools/call":
            text = self.headers.get("Authorization") or "none"
            result = {"content": [{"type": "text", "text": text}], "isError": False}
            self.reply(200, {"jsonrpc": "2.0", "id": mid, "result": result})
        else:
            err = {"code": -32601, "message": f"Method not found: {method}"}
            self.reply(200, {"jsonrpc": "2.0", "id": mid, "error": err})


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.replace(port_file + ".tmp", port_file)
server.serve_forever()
