#!/usr/bin/env python3
"""Probes pi 1.6.0's provider behaviour on the four wire APIs against
wire-mock.mjs (loopback, scripted raw replies): malformed SSE events, tool
arguments cut in half, retry classification of error answers, Retry-After,
and the request bodies it sends. The experiments behind FINDINGS.md §7.

Usage:  . tests/oracle/env.sh && python3 tests/oracle/probe-providers.py OUT_DIR [case ...]
Each case writes OUT_DIR/<case>/{stdout.jsonl,stderr.txt,exit,requests.jsonl,session.jsonl}.
"""
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
NODE = os.environ["NODE22"]
# PROBE_PI runs another command in pi's place (e.g. target/debug/pi-run) for side-by-side runs.
PI = shlex.split(os.environ.get("PROBE_PI") or os.environ["PI160"])


def sse(events):
    """OpenAI-style `data:` lines (str events are sent raw)."""
    out = ""
    for e in events:
        out += "data: " + (e if isinstance(e, str) else json.dumps(e)) + "\n\n"
    return out


def named(events):
    """`event:` + `data:` pairs (Anthropic, Responses)."""
    out = ""
    for name, data in events:
        out += f"event: {name}\ndata: " + (data if isinstance(data, str) else json.dumps(data)) + "\n\n"
    return out


def cc(delta, finish=None):
    return {"id": "chatcmpl-p", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def cc_text(text):
    return sse([cc({"role": "assistant", "content": ""}), cc({"content": text}), cc({}, "stop"),
                {"id": "chatcmpl-p", "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}},
                "[DONE]"])


def cc_tool(args_fragments, name="bash"):
    ev = [cc({"role": "assistant", "content": ""}),
          cc({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": name, "arguments": ""}}]})]
    for f in args_fragments:
        ev.append(cc({"tool_calls": [{"index": 0, "function": {"arguments": f}}]}))
    ev += [cc({}, "tool_calls"), "[DONE]"]
    return sse(ev)


def an_msg(blocks_events, stop="end_turn"):
    ev = [("message_start", {"type": "message_start", "message": {"id": "msg_p", "type": "message", "role": "assistant", "content": [], "model": "m", "stop_reason": None, "usage": {"input_tokens": 5, "output_tokens": 1}}})]
    ev += blocks_events
    ev += [("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 3}}),
           ("message_stop", {"type": "message_stop"})]
    return named(ev)


def an_text_events(parts, bad=None):
    ev = [("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})]
    for p in parts:
        ev.append(("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}}))
    if bad:
        ev.insert(2, ("content_block_delta", bad))
    ev.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
    return ev


def an_tool_events(fragments, name="bash"):
    ev = [("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_1", "name": name, "input": {}}})]
    for f in fragments:
        ev.append(("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": f}}))
    ev.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
    return ev


def rs_text(parts, bad=None):
    ev = [("response.created", {"type": "response.created", "response": {"id": "resp_p", "status": "in_progress"}}),
          ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": {"id": "msg_1", "type": "message", "role": "assistant", "status": "in_progress", "content": []}}),
          ("response.content_part.added", {"type": "response.content_part.added", "item_id": "msg_1", "output_index": 0, "content_index": 0, "part": {"type": "output_text", "text": ""}})]
    for p in parts:
        ev.append(("response.output_text.delta", {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": p}))
    if bad:
        ev.insert(4, ("response.output_text.delta", bad))
    text = "".join(parts)
    ev += [("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed", "content": [{"type": "output_text", "text": text, "annotations": []}]}}),
           ("response.completed", {"type": "response.completed", "response": {"id": "resp_p", "status": "completed", "usage": {"input_tokens": 5, "output_tokens": 2, "total_tokens": 7}}})]
    return named(ev)


def rs_tool(args, bad_event=None):
    ev = [("response.created", {"type": "response.created", "response": {"id": "resp_p", "status": "in_progress"}}),
          ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": {"id": "fc_1", "type": "function_call", "status": "in_progress", "arguments": "", "call_id": "call_1", "name": "bash"}}),
          ("response.function_call_arguments.delta", {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0, "delta": args}),
          ("response.function_call_arguments.done", {"type": "response.function_call_arguments.done", "item_id": "fc_1", "output_index": 0, "arguments": args}),
          ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": {"id": "fc_1", "type": "function_call", "status": "completed", "arguments": args, "call_id": "call_1", "name": "bash"}}),
          ("response.completed", {"type": "response.completed", "response": {"id": "resp_p", "status": "completed", "usage": {"input_tokens": 5, "output_tokens": 2, "total_tokens": 7}}})]
    if bad_event is not None:
        ev[bad_event] = (ev[bad_event][0], json.dumps(ev[bad_event][1])[:40])
    return named(ev)


def gm(parts, finish=None):
    c = {"content": {"parts": parts, "role": "model"}, "index": 0}
    if finish:
        c["finishReason"] = finish
    return {"candidates": [c], "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 2, "totalTokenCount": 7}}


def gm_text(parts, bad=False):
    ev = [gm([{"text": p}]) for p in parts]
    if bad:
        ev.insert(1, json.dumps(gm([{"text": " LOST"}]))[:30])
    ev.append(gm([{"text": ""}], "STOP"))
    return sse(ev)


BASE = {
    "openai-completions": "/v1",
    "openai-responses": "/v1",
    "anthropic-messages": "",
    "google-generative-ai": "/v1beta",
}


def run(out_dir, name, api, replies, prompt="go", settings=None, extra_args=(), reasoning=False, timeout=60, model_id="probe-model", compat=None, builtin=None, max_tokens=4096):
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    work = tempfile.mkdtemp(prefix="pi-probe-")
    agent = os.path.join(work, "agent")
    cwd = os.path.join(work, "cwd")
    os.makedirs(agent)
    os.makedirs(cwd)
    with open(os.path.join(work, "replies.json"), "w") as f:
        json.dump(replies, f)
    log = os.path.join(d, "requests.jsonl")
    if os.path.exists(log):
        os.remove(log)
    mock = subprocess.Popen([NODE, os.path.join(HERE, "wire-mock.mjs"), "--script", os.path.join(work, "replies.json"), "--log", log],
                            stdout=subprocess.PIPE, text=True)
    port = int(mock.stdout.readline().strip().split("=")[1])
    model = {"id": model_id, "name": "Probe", "reasoning": reasoning, "input": ["text"],
             "cost": {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0}, "contextWindow": 200000, "maxTokens": max_tokens}
    if compat:
        model["compat"] = compat
    models = {"providers": {"probe": {"baseUrl": f"http://127.0.0.1:{port}{BASE[api]}", "api": api, "apiKey": "test-key", "models": [model]}}}
    provider = "probe"
    if builtin:
        # a built-in provider pointed at the mock: its registry compat applies
        provider = builtin
        models = {"providers": {builtin: {"baseUrl": f"http://127.0.0.1:{port}{BASE[api]}", "apiKey": "test-key"}}}
    with open(os.path.join(agent, "models.json"), "w") as f:
        json.dump(models, f)
    s = {"defaultProvider": provider, "defaultModel": model_id, "retry": {"baseDelayMs": 50}}
    if settings:
        s.update(settings)
    with open(os.path.join(agent, "settings.json"), "w") as f:
        json.dump(s, f)
    env = {"HOME": os.path.join(work, "home"), "PATH": os.path.dirname(NODE) + ":" + os.environ["PATH"],
           "PI_CODING_AGENT_DIR": agent, "PI_OFFLINE": "1"}
    t = time.time()
    try:
        p = subprocess.run(PI + ["--mode", "json", *extra_args, prompt], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=timeout)
        code = p.returncode
        stdout, stderr = p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        code = "timeout"
        stdout = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        stderr = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
    elapsed = time.time() - t
    mock.terminate()
    mock.wait()
    with open(os.path.join(d, "stdout.jsonl"), "w") as f:
        f.write(stdout)
    with open(os.path.join(d, "stderr.txt"), "w") as f:
        f.write(stderr)
    with open(os.path.join(d, "exit"), "w") as f:
        f.write(f"{code} {elapsed:.2f}s\n")
    sessions = []
    for root, _, files in os.walk(os.path.join(agent, "sessions")):
        sessions += [os.path.join(root, x) for x in files if x.endswith(".jsonl")]
    if sessions:
        with open(sessions[0]) as src, open(os.path.join(d, "session.jsonl"), "w") as dst:
            dst.write(src.read())
    nreq = sum(1 for _ in open(log)) if os.path.exists(log) else 0
    print(f"{name}: exit {code} in {elapsed:.2f}s, {nreq} requests")


def cases():
    c = {}
    half = lambda e: json.dumps(e)[: len(json.dumps(e)) // 2]
    # 7: malformed SSE event (JSON cut in half) in the middle of a text stream
    c["malformed-completions"] = ("openai-completions", [
        {"body": sse([cc({"role": "assistant", "content": ""}), cc({"content": "Hello"}), half(cc({"content": " LOST"})), cc({"content": " world"}), cc({}, "stop"), "[DONE]"])}])
    c["malformed-anthropic"] = ("anthropic-messages", [
        {"body": an_msg(an_text_events(["Hello", " world"], bad=half({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": " LOST"}})))}])
    c["malformed-responses"] = ("openai-responses", [
        {"body": rs_text(["Hello", " world"], bad=half({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": " LOST"}))}])
    c["malformed-responses-tool"] = ("openai-responses", [{"body": rs_tool('{"command":"echo hi"}', bad_event=1)}])
    c["malformed-google"] = ("google-generative-ai", [{"body": gm_text(["Hello", " world"], bad=True)}])
    # 8: tool arguments cut in half (the stream itself is well formed)
    cut = ['{"command": "echo hel']
    c["badargs-completions"] = ("openai-completions", [{"body": cc_tool(cut)}, {"body": cc_text("done")}])
    c["badargs-anthropic"] = ("anthropic-messages", [{"body": an_msg(an_tool_events(cut), stop="tool_use")},
                                                     {"body": an_msg(an_text_events(["done"]))}])
    c["badargs-responses"] = ("openai-responses", [{"body": rs_tool(cut[0])}, {"body": rs_text(["done"])}])
    c["badargs-completions-notjson"] = ("openai-completions", [{"body": cc_tool(["not json at all"])}, {"body": cc_text("done")}])
    c["badargs-completions-array"] = ("openai-completions", [{"body": cc_tool(['["a"]'])}, {"body": cc_text("done")}])
    c["badargs-completions-empty"] = ("openai-completions", [{"body": cc_tool([], name="ls")}, {"body": cc_text("done")}])
    c["badargs-completions-spaces"] = ("openai-completions", [{"body": cc_tool(["  "], name="ls")}, {"body": cc_text("done")}])
    c["badargs-unknown-tool"] = ("openai-completions", [{"body": cc_tool(cut, name="nosuch")}, {"body": cc_text("done")}])
    c["badargs-anthropic-input-in-start"] = ("anthropic-messages", [{"body": an_msg([("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "echo start"}}}), ("content_block_stop", {"type": "content_block_stop", "index": 0})], stop="tool_use")}, {"body": an_msg(an_text_events(["done"]))}])
    c["goodargs-completions"] = ("openai-completions", [{"body": cc_tool(['{"command": "echo hi"}'])}, {"body": cc_text("done")}])
    # 9: retry classification
    err = lambda status, body, headers=None: {"status": status, "headers": {"content-type": "application/json", **(headers or {})}, "body": json.dumps(body)}
    ok = {"body": cc_text("recovered")}
    c["retry-400-with-429-text"] = ("openai-completions", [err(400, {"error": {"message": "Invalid value 429 for max_tokens", "type": "invalid_request_error"}}), ok])
    c["retry-400-with-503-text"] = ("openai-completions", [err(400, {"error": {"message": "bad request: upstream said 503 service unavailable", "type": "invalid_request_error"}}), ok])
    c["retry-402-quota"] = ("openai-completions", [err(402, {"error": {"message": "You exceeded your current quota", "type": "insufficient_quota", "code": "insufficient_quota"}}), ok])
    c["retry-429-quota"] = ("openai-completions", [err(429, {"error": {"message": "You exceeded your current quota, please check your plan and billing details.", "type": "insufficient_quota", "code": "insufficient_quota"}}), ok])
    c["retry-429"] = ("openai-completions", [err(429, {"error": {"message": "Rate limit reached"}}), ok])
    c["retry-408"] = ("openai-completions", [err(408, {"error": {"message": "Request timeout"}}), ok])
    c["retry-404"] = ("openai-completions", [err(404, {"error": {"message": "model not found"}}), ok])
    c["retry-409"] = ("openai-completions", [err(409, {"error": {"message": "conflict"}}), ok])
    c["retry-500"] = ("openai-completions", [err(500, {"error": {"message": "boom"}}), ok])
    c["retry-529"] = ("anthropic-messages", [err(529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}), {"body": an_msg(an_text_events(["recovered"]))}])
    c["retry-truncated-completions"] = ("openai-completions", [
        {"body": sse([cc({"role": "assistant", "content": ""}), cc({"content": "Hel"})])}, ok])
    c["retry-truncated-anthropic"] = ("anthropic-messages", [
        {"body": named([("message_start", {"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "content": [], "usage": {"input_tokens": 1, "output_tokens": 1}}})])},
        {"body": an_msg(an_text_events(["recovered"]))}])
    c["retry-truncated-responses"] = ("openai-responses", [
        {"body": named([("response.created", {"type": "response.created", "response": {"id": "r", "status": "in_progress"}})])}, {"body": rs_text(["recovered"])}])
    c["retry-truncated-google"] = ("google-generative-ai", [{"body": sse([gm([{"text": "Hel"}])])}, {"body": gm_text(["recovered"])}])
    c["retry-drop-completions"] = ("openai-completions", [{"body": sse([cc({"role": "assistant", "content": ""})]), "drop": True}, ok])
    for st in (401, 403, 413, 422, 501, 502, 504):
        c[f"retry-{st}"] = ("openai-completions", [err(st, {"error": {"message": "status test"}}), ok])
    c["retry-429-quota-text-only"] = ("openai-completions", [err(429, {"error": {"message": "You exceeded your current quota"}}), ok])
    c["retry-429-quota-code-only"] = ("openai-completions", [err(429, {"error": {"message": "Rate limited", "code": "insufficient_quota"}}), ok])
    c["retry-429-billing"] = ("openai-completions", [err(429, {"error": {"message": "billing hard limit has been reached"}}), ok])
    c["retry-429-usage-limit"] = ("openai-completions", [err(429, {"error": {"message": "You have reached your usage limit"}}), ok])
    c["retry-503-quota"] = ("openai-completions", [err(503, {"error": {"message": "quota exceeded"}}), ok])
    c["retry-400-rate-limit-text"] = ("openai-completions", [err(400, {"error": {"message": "rate limit: too many tools"}}), ok])
    c["retry-stream-error-event"] = ("openai-completions", [{"body": sse([cc({"role": "assistant", "content": ""}), {"error": {"message": "Rate limit reached for requests", "code": 429}}])}, ok])
    c["retry-anthropic-overloaded-event"] = ("anthropic-messages", [
        {"body": named([("message_start", {"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "content": [], "usage": {"input_tokens": 1, "output_tokens": 1}}}),
                        ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})])},
        {"body": an_msg(an_text_events(["recovered"]))}])
    c["retry-idle-timeout"] = ("openai-completions", [{"body": sse([cc({"role": "assistant", "content": ""})]), "stall": True}, ok])
    long_bad = json.dumps({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x" * 3000}})[:2500]
    c["malformed-anthropic-long"] = ("anthropic-messages", [{"body": an_msg(an_text_events(["Hello"], bad=long_bad))}])
    # 10: Retry-After (pi ignores it?)
    c["retry-after-seconds"] = ("openai-completions", [err(429, {"error": {"message": "slow down"}}, {"retry-after": "3"}), ok])
    c["retry-after-ms"] = ("openai-completions", [err(429, {"error": {"message": "slow down"}}, {"retry-after-ms": "2500"}), ok])
    c["retry-backoff-cap"] = ("openai-completions", [err(503, {"error": {"message": "down"}})] * 5 + [ok])
    # 11: request bodies, with a tool history in the session
    c["body-responses"] = ("openai-responses", [{"body": rs_tool('{"command":"echo hi"}')}, {"body": rs_text(["done"])}])
    c["body-anthropic"] = ("anthropic-messages", [{"body": an_msg(an_tool_events(['{"command":"echo hi"}']), stop="tool_use")},
                                                  {"body": an_msg(an_text_events(["done"]))}])
    c["body-responses-reasoning"] = c["body-responses"]
    c["body-anthropic-reasoning"] = c["body-anthropic"]
    c["body-anthropic-adaptive"] = c["body-anthropic"]
    c["body-anthropic-adaptive-compat"] = c["body-anthropic"]
    c["body-anthropic-builtin"] = c["body-anthropic"]
    c["body-responses-builtin"] = c["body-responses"]
    c["strict-null-args"] = ("openai-responses", [{"body": rs_tool('{"command":"echo hi","timeout":null}')}, {"body": rs_text(["done"])}])
    c["strict-null-args-custom"] = c["strict-null-args"]
    c["body-completions-strict"] = c["goodargs-completions"]
    c["body-completions-maxtokens"] = c["goodargs-completions"]
    c["body-anthropic-maxtokens"] = c["body-anthropic"]
    return c


OPTIONS = {
    "body-responses-reasoning": {"reasoning": True, "extra_args": ["--thinking", "high"]},
    "body-anthropic-reasoning": {"reasoning": True, "extra_args": ["--thinking", "high"]},
    "body-anthropic-adaptive-compat": {"reasoning": True, "extra_args": ["--thinking", "medium"], "model_id": "claude-sonnet-4-6",
                                       "compat": {"forceAdaptiveThinking": True, "supportsStrictTools": True}},
    "body-anthropic-builtin": {"extra_args": ["--thinking", "medium"], "model_id": "claude-sonnet-4-6", "builtin": "anthropic"},
    "body-responses-builtin": {"extra_args": ["--thinking", "medium"], "model_id": "gpt-5-mini", "builtin": "openai"},
    "body-completions-maxtokens": {"max_tokens": 100000},
    "body-completions-strict": {"compat": {"supportsStrictMode": True}},
    "strict-null-args": {"model_id": "gpt-5-mini", "builtin": "openai"},
    "body-anthropic-maxtokens": {"max_tokens": 100000},
    "body-anthropic-adaptive": {"reasoning": True, "extra_args": ["--thinking", "medium"], "model_id": "claude-sonnet-4-6"},
}

SETTINGS = {
    "retry-backoff-cap": {"retry": {"baseDelayMs": 100, "maxRetries": 6, "maxAgentDelayMs": 300}},
    "retry-after-seconds": {"retry": {"baseDelayMs": 50}},
    "retry-idle-timeout": {"httpIdleTimeoutMs": 1000, "retry": {"baseDelayMs": 50, "maxRetries": 1}},
    "malformed-anthropic-long": {"retry": {"enabled": False}},
}


if __name__ == "__main__":
    out = sys.argv[1]
    only = set(sys.argv[2:])
    for name, (api, replies) in cases().items():
        if only and name not in only:
            continue
        run(out, name, api, replies, settings=SETTINGS.get(name), **OPTIONS.get(name, {}))
