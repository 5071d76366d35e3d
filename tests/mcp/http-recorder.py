#!/usr/bin/env python3
"""A loopback streamable HTTP MCP server that records what clients send.

    http-recorder.py PORT_FILE LOG_FILE [TOKEN [oauth]]

Listens on 127.0.0.1 (or the loopback address in $RECORDER_HOST) on a free
port and writes the port to PORT_FILE once it listens. Every HTTP request is one JSON line in LOG_FILE:
{"method", "headers": {lower-case name: value}, "rpc": <JSON-RPC method or null>}.
It answers `initialize` (with an Mcp-Session-Id), notifications (202),
`tools/list` (one tool, `whoami`) and `tools/call whoami` (the text is the
request's Authorization header, or "none"). With TOKEN, a request whose
Authorization is not `Bearer TOKEN` gets 401 with a `WWW-Authenticate: Bearer`
challenge. GET is 405 (no server-sent stream); DELETE ends the session (200).

With `oauth` it is also its own OAuth authorization server, enough for a
sign-in: the 401 names `/.well-known/oauth-protected-resource`, whose
authorization server (itself) has metadata, dynamic registration
(`/register`), `/authorize` (redirects at once to the redirect URI with a
code) and `/token` (any code or refresh token gives TOKEN, a refresh token
and `expires_in: 3600`). A second tool, `admin`, is always refused with 403
`insufficient_scope` (scope `mcp:admin`).
"""

import json
import os
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

port_file, log_file = sys.argv[1], sys.argv[2]
token = sys.argv[3] if len(sys.argv) > 3 else None
oauth = len(sys.argv) > 4 and sys.argv[4] == "oauth"
host = os.environ.get("RECORDER_HOST", "127.0.0.1")
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

    def base(self):
        return f"http://{host}:{self.server.server_address[1]}"

    def authorized(self):
        if token is None or self.headers.get("Authorization") == f"Bearer {token}":
            return True
        challenge = 'Bearer realm="mcp"'
        if oauth:
            challenge = f'Bearer resource_metadata="{self.base()}/.well-known/oauth-protected-resource"'
        self.reply(401, {"error": "unauthorized"}, [("WWW-Authenticate", challenge)])
        return False

    def do_GET(self):
        log(self, None)
        path, _, query = self.path.partition("?")
        base = self.base()
        if oauth and path.startswith("/.well-known/oauth-protected-resource"):
            self.reply(200, {"resource": f"{base}/mcp", "authorization_servers": [base]})
        elif oauth and path.startswith("/.well-known/oauth-authorization-server"):
            self.reply(200, {
                "issuer": base,
                "authorization_endpoint": f"{base}/authorize",
                "token_endpoint": f"{base}/token",
                "registration_endpoint": f"{base}/register",
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code", "refresh_token"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["none", "client_secret_post"],
            })
        elif oauth and path == "/authorize":
            q = dict(urllib.parse.parse_qsl(query))
            target = q.get("redirect_uri", "") + "?" + urllib.parse.urlencode(
                {"code": "code-1", "state": q.get("state", "")})
            self.reply(302, None, [("Location", target)])
        elif oauth and path.startswith("/.well-known/"):
            self.reply(404, {"error": "not found"})
        else:
            self.reply(405)

    def oauth_post(self, path, body):
        if path == "/register":
            reg = json.loads(body or b"{}")
            reg.update({"client_id": "client-1", "token_endpoint_auth_method": "none"})
            self.reply(201, reg)
        else:
            self.reply(200, {"access_token": token, "token_type": "bearer",
                             "expires_in": 3600, "refresh_token": "refresh-1"})

    def do_DELETE(self):
        log(self, None)
        self.reply(200)

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        path = self.path.partition("?")[0]
        if oauth and path in ("/register", "/token"):
            log(self, path)
            self.oauth_post(path, body)
            return
        try:
            msg = json.loads(body or b"null")
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
            schema = {"type": "object", "properties": {}}
            tools = [{"name": "whoami", "description": "The Authorization header it got",
                      "inputSchema": schema}]
            if oauth:
                tools.append({"name": "admin", "description": "Needs mcp:admin", "inputSchema": schema})
            self.reply(200, {"jsonrpc": "2.0", "id": mid, "result": {"tools": tools}})
        elif method == "tools/call" and (msg.get("params") or {}).get("name") == "admin":
            challenge = 'Bearer error="insufficient_scope", scope="mcp:admin"'
            self.reply(403, {"error": "insufficient_scope"}, [("WWW-Authenticate", challenge)])
        elif method == "tools/call":
            text = self.headers.get("Authorization") or "none"
            result = {"content": [{"type": "text", "text": text}], "isError": False}
            self.reply(200, {"jsonrpc": "2.0", "id": mid, "result": result})
        else:
            err = {"code": -32601, "message": f"Method not found: {method}"}
            self.reply(200, {"jsonrpc": "2.0", "id": mid, "error": err})


class Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # a client that hangs up mid-request


server = Server((host, 0), Handler)
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.replace(port_file + ".tmp", port_file)
server.serve_forever()
