#!/usr/bin/env python3
"""Loopback OpenAI-style mock for bench/subagents.sh.

usage: subagents-mock.py PORTFILE N BACKGROUND [TIMELOG]
BACKGROUND == "1": the parent's first request (it offers an `Agent` tool
and has no tool results yet) gets N background `Agent` calls. Otherwise the
parent gets one foreground `Agent` call per request until N tool results
are in its messages, so N children run one after another. Every other
request gets a short text. N = 0: always text. With TIMELOG, each request
appends the seconds the mock spent on it (the model's time, which the bench
subtracts) as one line. Writes the port
to PORTFILE, serves until killed.
"""
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORTFILE, N, BG = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
TIMELOG = sys.argv[4] if len(sys.argv) > 4 else None
LOCK = threading.Lock()


def chunk(delta, finish=None):
    c = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "mock-model",
         "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return "data: " + json.dumps(c) + "\n\n"


def usage():
    c = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "mock-model",
         "choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}}
    return "data: " + json.dumps(c) + "\n\n"


def text(t):
    return chunk({"role": "assistant", "content": ""}) + chunk({"content": t}) + chunk({}, "stop") + usage() + "data: [DONE]\n\n"


def calls(n, first=0):
    s = chunk({"role": "assistant", "content": ""})
    for i in range(first, first + n):
        args = json.dumps({"subagent_type": "general-purpose", "prompt": f"task {i}",
                           "description": f"task {i}", "run_in_background": BG})
        s += chunk({"tool_calls": [{"index": i - first, "id": f"call_{i}", "type": "function",
                                    "function": {"name": "Agent", "arguments": args}}]})
    return s + chunk({}, "tool_calls") + usage() + "data: [DONE]\n\n"


class H(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def setup(self):
        self.t0 = time.perf_counter()
        super().setup()

    def finish(self):
        super().finish()
        if TIMELOG:
            with LOCK, open(TIMELOG, "a") as f:
                f.write(f"{time.perf_counter() - self.t0:.6f}\n")

    def do_POST(self):
        n = int(self.headers.get("content-length", "0"))
        body = json.loads(self.rfile.read(n) or b"null") or {}
        tools = [t.get("function", {}).get("name") for t in body.get("tools", [])]
        results = sum(1 for m in body.get("messages", []) if m.get("role") == "tool")
        if "Agent" not in tools or N == 0:
            out = text("done")
        elif BG:
            out = calls(N) if results == 0 else text("done")
        else:
            out = calls(1, results) if results < N else text("done")
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "close")
        self.end_headers()
        self.wfile.write(out.encode())


srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
with open(PORTFILE, "w") as f:
    f.write(str(srv.server_address[1]))
srv.serve_forever()
