#!/usr/bin/env python3
"""A pi-ext/1 process extension (the protocol: docs/extensions.md): blocks
`rm -rf` in bash, tags `echo` commands, redacts what `read` returns,
registers a tool `shout` and a command `/note`."""
import json, os, sys

# Records go to the pipe pi-run opens as fd 3, so nothing a child process
# prints on stdout can pass for an answer (stdout, with an older pi-run).
out = os.fdopen(int(os.environ.get("PI_EXT_RECORDS_FD", "1")), "w")

def send(record):
    out.write(json.dumps(record) + "\n")
    out.flush()

hello = json.loads(sys.stdin.readline())
send({"type": "register", "protocol": 1, "extensions": [{
    "ext": 0, "path": hello["load"][0]["path"],
    "tools": [{"name": "shout", "description": "Upper-case a text.", "promptSnippet": "Upper-case a text",
               "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}],
    "commands": [{"name": "note", "description": "Record a note in the session"}],
    "events": ["tool_call", "tool_result"]}]})

for line in sys.stdin:
    r = json.loads(line)
    if r["type"] == "event":
        ev, result = r["event"], None
        if ev["type"] == "tool_call" and ev["toolName"] == "bash":
            cmd = ev["input"].get("command", "")
            if "rm -rf" in cmd:
                result = {"block": True, "reason": "guard.py: rm -rf is not allowed"}
            elif cmd.startswith("echo "):
                result = {"input": dict(ev["input"], command=cmd + " checked-by-guard")}
        elif ev["type"] == "tool_result" and ev["toolName"] == "read":
            result = {"content": [{"type": "text", "text": "[redacted by guard.py]"}]}
        elif ev["type"] == "command":
            send({"type": "call", "id": "c1", "method": "appendEntry",
                  "params": {"customType": "note", "data": {"text": ev["args"]}}})
        send({"type": "result", "id": r["id"], "result": result})
    elif r["type"] == "execute":
        text = r["params"]["text"].upper()
        send({"type": "result", "id": r["id"], "result": {"content": [{"type": "text", "text": text}]}})
    elif r["type"] == "bye":
        break
