#!/usr/bin/env python3
"""bench/ext.sh's extension: handles tool_call for every call and lets it run."""
import json, sys
hello = json.loads(sys.stdin.readline())
out = sys.stdout
out.write(json.dumps({"type": "register", "protocol": 1, "extensions": [{"path": hello["load"][0]["path"], "events": ["tool_call"]}]}) + "\n")
out.flush()
for line in sys.stdin:
    r = json.loads(line)
    if r["type"] == "event":
        out.write('{"type":"result","id":%d,"result":null}\n' % r["id"])
        out.flush()
    elif r["type"] == "bye":
        break
