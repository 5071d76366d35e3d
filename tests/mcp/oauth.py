#!/usr/bin/env python3
"""A loopback streamable HTTP MCP server behind OAuth, for the `/mcp login` tests (stdlib only).

usage: oauth.py LOG
Prints PORT=<n> on its first stdout line. `POST /mcp` without the issued bearer token is a 401
whose challenge names the protected-resource metadata; the authorization server on the same port
offers dynamic client registration (`/register`), `/authorize` (a 302 straight back to the
redirect URI with a code and the state, as if the user approved) and `/token` (the code, with its
PKCE verifier checked, for the access token `tok-1`). With the token, `/mcp` answers
`initialize`, `tools/list` (one tool, `echo`) and `tools/call` as plain JSON. Every request is
appended to LOG as a JSON line {method, path}. SIGTERM stops it.
"""
import base64
import hashlib
import http.server
import json
import sys
import urllib.parse

LOG = sys.argv[1]
TOKEN = "tok-1"
codes = {}  # code -> code_challenge


def log(method, path):
    with open(LOG, "a") as f:
        f.write(json.dumps({"method": method, "path": path}) + "\n")


class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def base(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def send(self, code, body=None, headers=None):
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if body is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        u = urllib.parse.urlparse(self.path)
        log("GET", u.path)
        b = self.base()
        if u.path.startswith("/.well-known/oauth-protected-resource"):
            self.send(200, {"resource": b + "/mcp", "authorization_servers": [b]})
        elif u.path.startswith("/.well-known/oauth-authorization-server") or u.path.startswith(
                "/.well-known/openid-configuration"):
            self.send(200, {"issuer": b, "authorization_endpoint": b + "/authorize",
                            "token_endpoint": b + "/token", "registration_endpoint": b + "/register",
                            "response_types_supported": ["code"],
                            "grant_types_supported": ["authorization_code", "refresh_token"],
                            "code_challenge_methods_supported": ["S256"],
                            "token_endpoint_auth_methods_supported": ["none", "client_secret_post"]})
        elif u.path == "/authorize":
            q = dict(urllib.parse.parse_qsl(u.query))
            code = "code-%d" % (len(codes) + 1)
            codes[code] = q.get("code_challenge", "")
            to = q["redirect_uri"] + "?" + urllib.parse.urlencode({"code": code, "state": q.get("state", "")})
            self.send(302, None, {"Location": to})
        elif u.path == "/mcp":
            self.send(405, None)
        else:
            self.send(404, {"error": "not found"})

    def do_DELETE(self):
        log("DELETE", self.path)
        self.send(200, None)

    def do_POST(self):
        u = urllib.parse.urlparse(self.path)
        log("POST", u.path)
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n).decode()
        if u.path == "/register":
            meta = json.loads(raw or "{}")
            meta.update({"client_id": "client-1"})
            self.send(201, meta)
        elif u.path == "/token":
            f = dict(urllib.parse.parse_qsl(raw))
            want = codes.pop(f.get("code", ""), None)
            got = base64.urlsafe_b64encode(hashlib.sha256(f.get("code_verifier", "").encode()).digest()).rstrip(
                b"=").decode()
            if want is None or want != got:
                self.send(400, {"error": "invalid_grant"})
            else:
                self.send(200, {"access_token": TOKEN, "token_type": "Bearer", "expires_in": 3600})
        elif u.path == "/mcp":
            if self.headers.get("Authorization") != "Bearer " + TOKEN:
                md = self.base() + "/.well-known/oauth-protected-resource/mcp"
                self.send(401, {"error": "unauthorized"},
                          {"WWW-Authenticate": f'Bearer resource_metadata="{md}"'})
                return
            m = json.loads(raw)
            if "id" not in m:
                self.send(202, None)
                return
            method = m.get("method")
            if method == "initialize":
                r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
                     "serverInfo": {"name": "oauth-fixture", "version": "1"}}
            elif method == "tools/list":
                r = {"tools": [{"name": "echo", "description": "Echo the text.",
                                "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}]}
            elif method == "tools/call":
                r = {"content": [{"type": "text", "text": json.dumps(m["params"].get("arguments"))}]}
            else:
                self.send(200, {"jsonrpc": "2.0", "id": m["id"],
                                "error": {"code": -32601, "message": "Method not found"}})
                return
            self.send(200, {"jsonrpc": "2.0", "id": m["id"], "result": r})
        else:
            self.send(404, {"error": "not found"})


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(f"PORT={srv.server_address[1]}", flush=True)
srv.serve_forever()
