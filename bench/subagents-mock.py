#!/usr/bin/env python3
"""Loopback OpenAI-style mock for bench/subagents.sh.

usage: subagents-mock.py PORTFILE N BACKGROUND [TIMELOG]
BACKGROUND == "1": the parent's first request (it offers an `Agent` tool
and has no tool results yet) gets N background `Agent` calls, its next one
(N tool results) N `get_subagent_result` calls with `wait: true` for the
children the results name, so every child runs to its end and is read
before the parent's last turn (a one-shot pi does not wait for background
children by itself, and a result read this way is not notified again by
either implementation). Otherwise the
parent gets one foreground `Agent` call per request until N tool results
are in its messages, so N children run one after another. Every other
request gets a short text. N = 0: always text. With TIMELOG, each request
appends the seconds the mock spent on it (the model's time, which the bench
subtracts) as one line: from the read that brought its first bytes to
its answer's being ready to send. Writes the port to PORTFILE, serves until
killed.

One thread, non-blocking sockets (`selectors`), HTTP/1.1 keep-alive with a
Content-Length answer: a client that pools connections (reqwest, undici)
reuses one, and no thread is started or connection closed per request, so
what the mock costs outside the logged time (the wake-up from `select`, the
read of the request's bytes) is a few tens of microseconds, the same for
every client.
"""
import json
import re
import selectors
import socket
import sys
import time

PORTFILE, N, BG = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
TIMELOG = open(sys.argv[4], "a", buffering=1) if len(sys.argv) > 4 else None


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


def waits(ids):
    s = chunk({"role": "assistant", "content": ""})
    for i, a in enumerate(ids):
        args = json.dumps({"agent_id": a, "wait": True})
        s += chunk({"tool_calls": [{"index": i, "id": f"wait_{i}", "type": "function",
                                    "function": {"name": "get_subagent_result", "arguments": args}}]})
    return s + chunk({}, "tool_calls") + usage() + "data: [DONE]\n\n"


# A background start's result names the child: "Session ID: <id>" (pi-run),
# "Agent ID: <id>" (@tintinweb/pi-subagents).
CHILD_ID = re.compile(r"(?:Session|Agent) ID: ([0-9A-Za-z-]+)")


def answer(body):
    tools = [t.get("function", {}).get("name") for t in body.get("tools", []) or []]
    results = [m for m in body.get("messages", []) if m.get("role") == "tool"]
    if "Agent" not in tools or N == 0:
        return text("done")
    if BG:
        if not results:
            return calls(N)
        if len(results) == N:
            ids = [CHILD_ID.search(json.dumps(m.get("content"))) for m in results]
            return waits([i.group(1) for i in ids if i])
        return text("done")
    return calls(1, len(results)) if len(results) < N else text("done")


class Conn:
    def __init__(self, sock):
        self.sock = sock
        self.buf = b""
        self.t0 = None


def serve(sel, conn):
    try:
        data = conn.sock.recv(1 << 20)
    except BlockingIOError:
        return
    except OSError:
        data = b""
    if not data:
        sel.unregister(conn.sock)
        conn.sock.close()
        return
    if not conn.buf:
        conn.t0 = time.perf_counter()
    conn.buf += data
    while True:
        end = conn.buf.find(b"\r\n\r\n")
        if end < 0:
            return
        head = conn.buf[:end].decode("latin-1").split("\r\n")
        length = 0
        close = False
        for line in head[1:]:
            k, _, v = line.partition(":")
            k = k.strip().lower()
            if k == "content-length":
                length = int(v.strip())
            elif k == "connection" and v.strip().lower() == "close":
                close = True
        if len(conn.buf) < end + 4 + length:
            return
        raw = conn.buf[end + 4:end + 4 + length]
        conn.buf = conn.buf[end + 4 + length:]
        try:
            body = json.loads(raw or b"null") or {}
        except ValueError:
            body = {}
        out = answer(body).encode()
        head = (f"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                f"content-length: {len(out)}\r\n"
                f"connection: {'close' if close else 'keep-alive'}\r\n\r\n").encode()
        # Logged before the answer leaves, so the line is in the file
        # before the client can have finished.
        if TIMELOG:
            TIMELOG.write(f"{time.perf_counter() - conn.t0:.6f}\n")
        conn.sock.setblocking(True)
        conn.sock.sendall(head + out)
        conn.sock.setblocking(False)
        conn.t0 = time.perf_counter() if conn.buf else None
        if close:
            sel.unregister(conn.sock)
            conn.sock.close()
            return


def main():
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(64)
    lsock.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(lsock, selectors.EVENT_READ, None)
    with open(PORTFILE, "w") as f:
        f.write(str(lsock.getsockname()[1]))
    while True:
        for key, _ in sel.select():
            if key.data is None:
                try:
                    s, _ = lsock.accept()
                except BlockingIOError:
                    continue
                s.setblocking(False)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sel.register(s, selectors.EVENT_READ, Conn(s))
            else:
                serve(sel, key.data)


main()
