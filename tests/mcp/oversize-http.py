#!/usr/bin/env python3
"""A loopback streamable HTTP MCP server whose one tool answers too much.

    oversize-http.py PORT_FILE [sse]

Listens on 127.0.0.1 on a free port and writes the port to PORT_FILE. It
answers `initialize` and `tools/list` (one tool, `big`); `tools/call` gets
a result of 17,000,000 characters, as a JSON body, or with `sse` as one
server-sent event: a message over the client's 16 MiB cap.
"""

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

port_file = sys.argv[1]
sse = len(sys.argv) > 2 and sys.argv[2] == "sse"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def empty(self, status):
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        self.empty(405)

    def do_DELETE(self):
        self.empty(200)

    def do_POST(self):
        msg = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        method, mid = msg.get("method"), msg.get("id")
        if mid is None:
            return self.empty(202)
        if method == "initialize":
            result = {"protocolVersion": msg["params"]["protocolVersion"],
                      "capabilities": {"tools": {}}, "serverInfo": {"name": "big", "version": "1"}}
        elif method == "tools/list":
            result = {"tools": [{"name": "big", "description": "Answers 17 MB.",
                                 "inputSchema": {"type": "object"}}]}
        else:
            result = {"content": [{"type": "text", "text": "x" * 17000000}]}
        body = json.dumps({"jsonrpc": "2.0", "id": mid, "result": result})
        if sse:
            data, kind = ("event: message\ndata: " + body + "\n\n").encode(), "text/event-stream"
        else:
            data, kind = body.encode(), "application/json"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Mcp-Session-Id", "s1")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass


server = Server(("127.0.0.1", 0), Handler)
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.replace(port_file + ".tmp", port_file)
server.serve_forever()
