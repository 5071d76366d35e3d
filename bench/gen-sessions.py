#!/usr/bin/env python3
"""Generate a synthetic pi session store (JSONL, session format v3) for benchmarks.

Usage:
    gen-sessions.py OUTDIR [--sessions 10000] [--total-bytes 2G] [--seed 1]
                           [--cwds 60] [--jobs N] [--line-mix default|small]

Writes OUTDIR/sessions/--<encoded cwd>--/<iso-ts>_<uuid>.jsonl, i.e. OUTDIR is
usable as PI_CODING_AGENT_DIR.  Python 3.11 standard library only.

Output is deterministic for a given (--sessions, --total-bytes, --seed, --cwds)
regardless of --jobs: every session is generated from its own RNG seeded with
"<seed>:<index>", and the plan (sizes, cwds, start times) comes from one
master RNG.  File mtimes are set to the session's last entry time.

Realism goals (what a listing implementation has to chew through):
  * header, model_change, thinking_level_change, a leading system message of
    a few KB (content "", sections{...}, toolsAdded[...]);
  * user prompts (array or string content, occasionally pasted code or a
    base64 image), assistant messages with thinking/text/toolCall blocks and a
    full usage+cost object, toolResult messages whose sizes are heavy-tailed
    (most < 2 KB, some 20-50 KB of code-like text with escaped quotes,
    backslashes, tabs, newlines and non-ASCII characters);
  * occasional compaction, branch (entry whose parentId points back to an
    earlier entry, sometimes with a branch_summary), label, session_info
    name, custom, custom_message, usage, mid-session model_change, and
    bashExecution messages;
  * session sizes heavy-tailed (most 50-300 KB, a few several MB) and scaled
    so the total is about --total-bytes.

--line-mix small draws every content size (tool results, edits, thinking,
text, pastes, signatures) at 1/100 of the default, makes thinking and side
text rarer, parallel tool calls (2-4 per assistant message) more common
(70%), starts sessions with the short system message instead of the ~9 KB
one, and sizes sessions evenly around total/count with no multi-MB tail:
the shape of real pi sessions, hundreds of short lines (3000 sessions /
300M gives ~105 KB sessions of ~205 lines, ~510 B a line). That is about
as short as pi's layout gets: an assistant line with its usage and cost
is ~600 B and a tool result line ~280 B even when its output is empty,
so ~300 lines in 100 KB (~330 B a line) would need sessions made mostly
of entries pi rarely writes. The default mix is unchanged, byte for byte.
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import multiprocessing
import os
import random
import sys
import time

# --------------------------------------------------------------------------
# helpers

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def jb(obj) -> bytes:
    """JSON.stringify-like (no spaces, raw UTF-8) -> bytes."""
    return _dumps(obj).encode()


def jstr(s: str) -> bytes:
    """JSON string literal incl. quotes, as bytes."""
    return _dumps(s).encode()


def parse_size(s: str) -> int:
    s = s.strip().upper()
    mult = 1
    for suf, m in (("KB", 1 << 10), ("MB", 1 << 20), ("GB", 1 << 30), ("TB", 1 << 40),
                   ("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30), ("T", 1 << 40), ("B", 1)):
        if s.endswith(suf):
            mult = m
            s = s[: -len(suf)]
            break
    return int(float(s) * mult)


# Line-size mix (--line-mix): content sizes drawn for messages are multiplied by SCALE.
# 1.0 is the original mix (a few huge tool results and edits per session); "small" makes the
# many-short-lines sessions real pi usage is mostly made of.
LINE_MIXES = {"default": 1.0, "small": 0.01}
SCALE = 1.0


def sz(n: int) -> int:
    """A drawn content size under the current line mix (identity for the default mix)."""
    return n if SCALE == 1.0 else max(8, int(n * SCALE))


_TS_CACHE: dict[int, str] = {}


def iso(ms: int) -> str:
    sec = ms // 1000
    base = _TS_CACHE.get(sec)
    if base is None:
        if len(_TS_CACHE) > 100000:
            _TS_CACHE.clear()
        base = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))
        _TS_CACHE[sec] = base
    return "%s.%03dZ" % (base, ms % 1000)


def jsnum(x: float) -> bytes:
    """Format a float the way JavaScript's Number#toString does (for the common ranges)."""
    if x == int(x) and abs(x) < 1e21:
        return b"%d" % int(x)
    r = repr(x)
    if "e" not in r:
        return r.encode()
    if abs(x) < 1e-6:  # JS keeps exponent form, but without zero padding: 9e-7
        m, e = r.split("e")
        return (m + "e" + str(int(e))).encode()
    m, e = r.split("e")
    e = int(e)
    neg = m.startswith("-")
    m = m.lstrip("-")
    digits = m.replace(".", "")
    point = (m.index(".") if "." in m else len(m)) + e
    if point <= 0:
        out = "0." + "0" * (-point) + digits
    else:
        out = digits[:point] + "." + digits[point:] if point < len(digits) else digits + "0" * (point - len(digits))
    out = out.rstrip("0").rstrip(".") if "." in out else out
    return (("-" if neg else "") + out).encode()


def uuid4(rng: random.Random) -> str:
    n = rng.getrandbits(128)
    n &= ~(0xF000 << 64)
    n |= 0x4000 << 64  # version 4
    n &= ~(0xC000 << 48)
    n |= 0x8000 << 48  # variant 10xx
    h = "%032x" % n
    return f"{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def encode_cwd(cwd: str) -> str:
    c = cwd[1:] if cwd.startswith(("/", "\\")) else cwd
    return "--" + c.replace("/", "-").replace("\\", "-").replace(":", "-") + "--"


# --------------------------------------------------------------------------
# shared pre-generated material (built once in the parent, inherited by fork)

WORDS = (
    "the a to of and in is it for that this with on be as are was by an not or at from can "
    "we but you have function return value error file test build type module config session "
    "entry parse json line path string buffer read write async await promise struct impl trait "
    "vector index cache thread lock request response server client token model provider usage "
    "cost message tool result call branch compact summary label name cwd directory listing sort "
    "timestamp header version migrate fix bug refactor rename extract inline check verify should "
    "would could maybe instead because however therefore first then next finally also only just "
    "still already quickly carefully correctly probably likely exactly rust cargo node python "
    "typescript benchmark performance memory allocation iterator closure lifetime borrow"
).split()

NON_ASCII = ["é", "ü", "ß", "→", "✓", "✗", "…", "—", "日本語", "中文", "🚀", "🔥", "λ", "π", "Ω", "ñ", "ø"]

IDENTS = (
    "session entries header parser reader writer buffer config options state ctx result value "
    "items index count total path file dir name id parent child leaf tree node map list queue "
    "handler callback stream chunk bytes offset len size width height model provider usage "
    "cost tokens message content block text thinking tool args output input error status"
).split()

TYPES = "String Vec<u8> Option<String> HashMap<String, Value> usize u64 i32 bool &str Result<(), Error> PathBuf".split(" ")


def _code_line(rng: random.Random, indent: int) -> str:
    ind = "    " * indent if rng.random() < 0.9 else "\t" * indent
    a, b, c = rng.choice(IDENTS), rng.choice(IDENTS), rng.choice(IDENTS)
    k = rng.random()
    if k < 0.12:
        return f'{ind}let {a}_{b} = {c}.get("{b}").unwrap_or_default();'
    if k < 0.22:
        return f'{ind}const {a} = await {b}.{c}("{rng.choice(WORDS)} \\"{rng.choice(WORDS)}\\"", {{ {c}: {rng.randint(0, 9999)} }});'
    if k < 0.30:
        return f"{ind}if {a}.{b}.is_empty() {{ return Err(anyhow!(\"{rng.choice(WORDS)} {rng.choice(NON_ASCII)} {rng.choice(WORDS)}\")); }}"
    if k < 0.38:
        return f"{ind}// {' '.join(rng.choice(WORDS) for _ in range(rng.randint(3, 12)))}"
    if k < 0.45:
        return f"{ind}fn {a}_{b}(&self, {c}: {rng.choice(TYPES)}) -> {rng.choice(TYPES)} {{"
    if k < 0.52:
        return f"{ind}def {a}_{b}(self, {c}, *args, **kwargs):  # {rng.choice(NON_ASCII)}"
    if k < 0.58:
        return f"{ind}print(f\"{{{a}!r}}: {rng.choice(WORDS)}\\t{{{b}}}\\n\")"
    if k < 0.64:
        return f"{ind}path = r'C:\\Users\\{a}\\{b}\\{c}.txt'"
    if k < 0.70:
        return f"{ind}}}"
    if k < 0.76:
        return ""
    if k < 0.82:
        return f'{ind}"{a}": {{"{b}": [{rng.randint(0, 999)}, {rng.random():.4f}, null, true], "{c}": "{rng.choice(WORDS)}"}},'
    if k < 0.88:
        return f"{ind}{a}.{b}.push({c}.clone()); // {rng.choice(NON_ASCII)} {rng.choice(WORDS)}"
    if k < 0.93:
        return f"{ind}<div class=\"{a}-{b}\" data-{c}='{rng.randint(0, 99)}'>{rng.choice(WORDS)} &amp; {rng.choice(WORDS)}</div>"
    return f"{ind}{a} = {b} + {c} * {rng.randint(1, 99)}  # {' '.join(rng.choice(WORDS) for _ in range(rng.randint(2, 6)))}"


def build_corpus(rng: random.Random, target: int) -> tuple[bytes, list[int]]:
    """Code-like text, JSON-escaped (no quotes), UTF-8 bytes + offsets of line starts."""
    lines = []
    size = 0
    indent = 0
    while size < target:
        if rng.random() < 0.03:
            lines.append(f"// ==== {rng.choice(IDENTS)}/{rng.choice(IDENTS)}.rs ====")
            indent = 0
        line = _code_line(rng, indent)
        if line.endswith("{") or line.endswith(":"):
            indent = min(indent + 1, 5)
        elif line.strip() == "}":
            indent = max(indent - 1, 0)
        lines.append(line)
        size += len(line) + 2
    esc = [jstr(l)[1:-1] for l in lines]
    offsets = []
    pos = 0
    parts = []
    for e in esc:
        offsets.append(pos)
        parts.append(e)
        parts.append(b"\\n")
        pos += len(e) + 2
    return b"".join(parts), offsets


def build_prose(rng: random.Random, target: int) -> tuple[bytes, list[int]]:
    """Prose-like text (assistant text/thinking/summaries), JSON-escaped bytes + sentence starts."""
    sents = []
    size = 0
    while size < target:
        n = rng.randint(5, 24)
        ws = [rng.choice(WORDS) for _ in range(n)]
        if rng.random() < 0.15:
            ws.insert(rng.randrange(n), "`" + rng.choice(IDENTS) + "." + rng.choice(IDENTS) + "()`")
        if rng.random() < 0.06:
            ws.insert(rng.randrange(n), rng.choice(NON_ASCII))
        if rng.random() < 0.05:
            ws.insert(rng.randrange(n), '"' + rng.choice(WORDS) + '"')
        s = " ".join(ws)
        s = s[0].upper() + s[1:] + rng.choice([". ", ". ", ". ", "? ", ".\n\n", ":\n- ", ".\n"])
        sents.append(s)
        size += len(s)
    esc = [jstr(s)[1:-1] for s in sents]
    offsets = []
    pos = 0
    for e in esc:
        offsets.append(pos)
        pos += len(e)
    return b"".join(esc), offsets


class Blob:
    """Slices of a pre-escaped text at unit boundaries (never inside an escape)."""

    def __init__(self, data: bytes, offsets: list[int]):
        self.data = data
        self.offsets = offsets
        self.n = len(offsets)

    def take(self, rng: random.Random, nbytes: int) -> bytes:
        nbytes = max(1, nbytes)
        if nbytes >= len(self.data) - 1:
            return self.data
        i = rng.randrange(self.n)
        start = self.offsets[i]
        if start + nbytes > len(self.data):
            i = bisect.bisect_left(self.offsets, len(self.data) - nbytes) - 1
            i = max(0, i)
            start = self.offsets[i]
        j = bisect.bisect_left(self.offsets, start + nbytes, i + 1)
        end = self.offsets[j] if j < self.n else len(self.data)
        return self.data[start:end]


CODE: Blob
PROSE: Blob
B64: bytes
SYSTEM_SECTIONS: bytes
TOOLS_ADDED: bytes

TOOL_DEFS = [
    ("read", "Read the contents of a file. Supports text files and images (jpg, png, gif, webp). For text files, output is truncated to 2000 lines or 50KB (whichever is hit first). Use offset/limit for large files.",
     {"type": "object", "properties": {"path": {"type": "string", "description": "Path to the file to read (relative or absolute)"}, "offset": {"type": "number", "description": "Line number to start reading from (1-indexed)"}, "limit": {"type": "number", "description": "Maximum number of lines to read"}}, "required": ["path"]}),
    ("bash", "Execute a bash command in the current working directory. Returns stdout and stderr. Output is truncated to last 2000 lines or 50KB (whichever is hit first). Optionally provide a timeout in seconds.",
     {"type": "object", "properties": {"command": {"type": "string", "description": "Bash command to execute"}, "timeout": {"type": "number", "description": "Timeout in seconds (optional, no default timeout)"}}, "required": ["command"]}),
    ("edit", "Edit a file by replacing exact text. The oldText must match exactly (including whitespace). Use this for precise, surgical edits.",
     {"type": "object", "properties": {"path": {"type": "string", "description": "Path to the file to edit (relative or absolute)"}, "oldText": {"type": "string", "description": "Exact text to find and replace (must match exactly)"}, "newText": {"type": "string", "description": "New text to replace the old text with"}}, "required": ["path", "oldText", "newText"]}),
    ("write", "Write content to a file. Creates the file if it doesn't exist, overwrites if it does. Automatically creates parent directories.",
     {"type": "object", "properties": {"path": {"type": "string", "description": "Path to the file to write (relative or absolute)"}, "content": {"type": "string", "description": "Content to write to the file"}}, "required": ["path", "content"]}),
    ("grep", "Search file contents for a pattern. Returns matching lines with file paths and line numbers. Respects .gitignore.",
     {"type": "object", "properties": {"pattern": {"type": "string"}, "path": {"type": "string"}, "glob": {"type": "string"}, "ignoreCase": {"type": "boolean"}, "literal": {"type": "boolean"}, "context": {"type": "number"}, "limit": {"type": "number"}}, "required": ["pattern"]}),
    ("find", "Search for files by glob pattern. Returns matching file paths relative to the search directory. Respects .gitignore.",
     {"type": "object", "properties": {"pattern": {"type": "string"}, "path": {"type": "string"}, "limit": {"type": "number"}}, "required": ["pattern"]}),
    ("ls", "List directory contents. Returns entries sorted alphabetically, with '/' suffix for directories. Includes dotfiles.",
     {"type": "object", "properties": {"path": {"type": "string"}, "limit": {"type": "number"}}}),
]


def init_shared(seed: int) -> None:
    global CODE, PROSE, B64, SYSTEM_SECTIONS, TOOLS_ADDED
    rng = random.Random(f"corpus:{seed}")
    CODE = Blob(*build_corpus(rng, 6 << 20))
    PROSE = Blob(*build_prose(rng, 2 << 20))
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    B64 = "".join(rng.choice(alphabet) for _ in range(1 << 20)).encode()
    def raw(b: bytes) -> str:
        return json.loads(b'"' + b + b'"')

    preamble = (
        "You are an expert coding assistant operating inside pi, a coding agent harness. "
        "You help users by reading files, executing commands, editing code, and writing new files.\n\n"
        "Guidelines:\n" + "".join(f"- {raw(PROSE.take(rng, 160))}\n" for _ in range(14))
    )
    sections = {
        "preamble": preamble,
        "tools": "<tools>\n" + "".join(f"- {n}: {d}\n" for n, d, _ in TOOL_DEFS) + "</tools>",
        "docs": "Pi documentation (read only when the user asks about pi itself):\n- Main documentation: /usr/lib/node_modules/@earendil-works/pi-coding-agent/README.md\n- Additional docs: /usr/lib/node_modules/@earendil-works/pi-coding-agent/docs\n",
        "agents": "<project_context>\n# AGENTS.md\n\n" + "".join(f"- {raw(PROSE.take(rng, 120))}\n" for _ in range(8)) + "</project_context>",
    }
    SYSTEM_SECTIONS = jb(sections)
    tools = [{"name": n, "description": d, "parameters": p} for n, d, p in TOOL_DEFS]
    TOOLS_ADDED = jb(tools)


# --------------------------------------------------------------------------
# session generator

MODELS = [
    # provider, api, model, $/Mtok input, output, cacheRead, cacheWrite, weight
    ("anthropic", "anthropic-messages", "claude-opus-4-6", 5.0, 25.0, 0.5, 6.25, 4),
    ("anthropic", "anthropic-messages", "claude-sonnet-4-5", 3.0, 15.0, 0.3, 3.75, 4),
    ("openai", "openai-responses", "gpt-5.2-codex", 1.75, 14.0, 0.175, 0.0, 2),
    ("google", "google-generative-ai", "gemini-3-pro-preview", 2.0, 12.0, 0.2, 0.0, 1),
    ("openrouter", "openai-completions", "moonshotai/kimi-k2.5", 0.6, 2.5, 0.15, 0.0, 1),
]
MODEL_WEIGHTS = [m[7] for m in MODELS]
THINKING = ["off", "minimal", "low", "medium", "high", "xhigh"]

PROMPTS = [
    "Fix the failing test in {f}",
    "Can you refactor {f} so that the {a} handling is separate from {b}?",
    "Why does `cargo test` fail with \"{a} not found\" after my last change?",
    "Add a --{a} flag to the CLI and document it in the README",
    "Review the diff and tell me what could break",
    "Implement {a} caching for {b} lookups, keep it simple",
    "Explain how {f} works",
    "The {a} output is wrong for unicode input (é, 日本語) — investigate",
    "Write benchmarks for the {a} parser",
    "Port {f} to async and make sure nothing blocks",
    "continue",
    "yes, do it",
    "Run the full test suite and fix whatever fails",
    "Make {a}_{b} return a Result instead of panicking",
]
CUSTOM_TYPES = ["pi.virtual-model-state", "todo-extension", "plan-mode", "git-checkpoint", "subagent-state"]
NAMES = ["Refactor {a} module", "Fix {a} bug", "Add {a} support", "{a} {b} investigation", "Benchmark {a}"]


class Session:
    __slots__ = ("rng", "out", "size", "target", "ids", "id_list", "leaf", "t", "tool_n",
                 "model", "thinking", "user_ids", "tokens")

    def __init__(self, rng: random.Random, t0: int):
        self.rng = rng
        self.out: list[bytes] = []
        self.size = 0
        self.ids: set[str] = set()
        self.id_list: list[str] = []
        self.user_ids: list[str] = []
        self.leaf: str | None = None
        self.t = t0
        self.tool_n = 0
        self.tokens = 2000
        self.target = 1 << 62

    def emit(self, line: bytes) -> None:
        self.out.append(line)
        self.size += len(line) + 1

    def new_id(self) -> str:
        rng = self.rng
        while True:
            i = "%08x" % rng.getrandbits(32)
            if i not in self.ids:
                self.ids.add(i)
                self.id_list.append(i)
                return i

    def tick(self, lo: int, hi: int) -> int:
        self.t += self.rng.randint(lo, hi)
        return self.t

    def base(self, typ: str, lo: int = 50, hi: int = 3000) -> tuple[bytes, str]:
        """Return (b'"type":..,"id":..,"parentId":..,"timestamp":..', id) and advance leaf."""
        eid = self.new_id()
        ts = self.tick(lo, hi)
        parent = b"null" if self.leaf is None else b'"' + self.leaf.encode() + b'"'
        head = b'"type":"%s","id":"%s","parentId":%s,"timestamp":"%s"' % (
            typ.encode(), eid.encode(), parent, iso(ts).encode())
        self.leaf = eid
        return head, eid

    # ---- entries

    def model_change(self) -> None:
        m = self.model
        head, _ = self.base("model_change", 1, 20)
        self.emit(b"{%s,\"provider\":\"%s\",\"modelId\":\"%s\"}" % (head, m[0].encode(), m[2].encode()))

    def thinking_change(self) -> None:
        head, _ = self.base("thinking_level_change", 1, 20)
        self.emit(b"{%s,\"thinkingLevel\":\"%s\"}" % (head, self.thinking.encode()))

    def system_message(self, full: bool) -> None:
        head, _ = self.base("message", 1, 30)
        if full:
            body = b'"role":"system","content":"","sections":' + SYSTEM_SECTIONS + b',"toolsAdded":' + TOOLS_ADDED
        else:
            sec = b'{"skills":"<skills>\\n' + PROSE.take(self.rng, self.rng.randint(200, 1500)) + b'\\n</skills>"}'
            body = b'"role":"system","content":"","sections":' + sec + b',"toolsRemoved":[{"name":"write"}]'
        self.emit(b"{%s,\"message\":{%s,\"timestamp\":%d}}" % (head, body, self.t))

    def user(self) -> None:
        rng = self.rng
        head, eid = self.base("message", 5000, 240000)
        self.user_ids.append(eid)
        p = rng.choice(PROMPTS).format(
            f=f"src/{rng.choice(IDENTS)}/{rng.choice(IDENTS)}.rs", a=rng.choice(IDENTS), b=rng.choice(IDENTS))
        text = jstr(p)[1:-1]
        r = rng.random()
        if r < 0.08:  # pasted code / logs
            text += b"\\n\\n```\\n" + CODE.take(rng, sz(int(rng.paretovariate(1.2) * 1500))) + b"```"
        elif r < 0.25:
            text += b" " + PROSE.take(rng, sz(rng.randint(50, 600)))
        if rng.random() < 0.2:
            content = b'"' + text + b'"'
        else:
            content = b'[{"type":"text","text":"' + text + b'"}'
            if rng.random() < 0.015:  # screenshot
                n = min(len(B64), sz(int(rng.paretovariate(1.3) * 40000))) & ~3
                content += b',{"type":"image","data":"' + B64[:n] + b'","mimeType":"image/png"}'
            content += b"]"
        self.emit(b"{%s,\"message\":{\"role\":\"user\",\"content\":%s,\"timestamp\":%d}}" % (head, content, self.t))
        self.tokens += rng.randint(50, 3000)

    def usage_obj(self, out_tokens: int) -> bytes:
        rng = self.rng
        m = self.model
        inp = rng.randint(1, 3000)
        cache_read = max(0, self.tokens - inp - rng.randint(0, 4000))
        cache_write = rng.randint(0, 8000) if m[0] == "anthropic" else 0
        total = inp + out_tokens + cache_read + cache_write
        ci, co, cr, cw = inp * m[3] / 1e6, out_tokens * m[4] / 1e6, cache_read * m[5] / 1e6, cache_write * m[6] / 1e6
        return (b'{"input":%d,"output":%d,"cacheRead":%d,"cacheWrite":%d,"totalTokens":%d,'
                b'"cost":{"input":%s,"output":%s,"cacheRead":%s,"cacheWrite":%s,"total":%s}}') % (
            inp, out_tokens, cache_read, cache_write, total,
            jsnum(ci), jsnum(co), jsnum(cr), jsnum(cw), jsnum(ci + co + cr + cw))

    def assistant(self, final: bool) -> list[tuple[str, str]]:
        """Emit an assistant message; returns the tool calls [(id, name)]."""
        rng = self.rng
        m = self.model
        head, _ = self.base("message", 1500, 90000)
        blocks = []
        # (the small mix thinks out loud less often: one extra draw, only there)
        if self.thinking != "off" and rng.random() < 0.8 and (SCALE == 1.0 or rng.random() < 0.25):
            th = PROSE.take(rng, sz(int(rng.paretovariate(1.5) * 300)))
            sig = B64[rng.randrange(0, 4096):][: sz(rng.randint(200, 1600))] if m[0] == "anthropic" else b""
            blocks.append(b'{"type":"thinking","thinking":"' + th + b'","thinkingSignature":"' + sig + b'"}')
        if final or (rng.random() < 0.5 and (SCALE == 1.0 or rng.random() < 0.4)):
            blocks.append(b'{"type":"text","text":"' + PROSE.take(rng, sz(int(rng.paretovariate(1.3) * 250))) + b'"}')
        calls = []
        if not final:
            # (the small mix calls tools in parallel more often: the short result lines pile up)
            multi = rng.random() >= 0.75 if SCALE == 1.0 else rng.random() >= 0.3
            for _ in range(rng.randint(2, 4) if multi else 1):
                self.tool_n += 1
                cid = ("toolu_01%018x" % rng.getrandbits(72)) if m[0] == "anthropic" else ("call_%024x" % rng.getrandbits(96))
                name = rng.choices(["read", "bash", "edit", "write", "grep", "find", "ls"], [30, 30, 18, 5, 9, 5, 3])[0]
                path = f"src/{rng.choice(IDENTS)}/{rng.choice(IDENTS)}.{rng.choice(['rs', 'ts', 'py', 'md'])}"
                if name == "read":
                    args = b'{"path":"' + path.encode() + b'"}'
                elif name == "bash":
                    args = jb({"command": rng.choice([
                        "cargo test 2>&1 | tail -50", "ls -la", f"rg -n \"{rng.choice(IDENTS)}\" src/",
                        "git status && git diff --stat", f"cat {path} | head -100", "npm run check",
                        f"python3 -c 'import json; print(json.load(open(\"{path}\")))'"])})
                elif name == "edit":
                    args = (b'{"path":"' + path.encode() + b'","oldText":"' + CODE.take(rng, sz(rng.randint(60, 1500)))
                            + b'","newText":"' + CODE.take(rng, sz(rng.randint(60, 2500))) + b'"}')
                elif name == "write":
                    args = b'{"path":"' + path.encode() + b'","content":"' + CODE.take(rng, sz(int(rng.paretovariate(1.2) * 2000))) + b'"}'
                elif name == "grep":
                    args = jb({"pattern": rng.choice(IDENTS) + "\\(", "path": "src", "ignoreCase": rng.random() < 0.3})
                elif name == "find":
                    args = jb({"pattern": "**/*." + rng.choice(["rs", "ts", "json"])})
                else:
                    args = jb({"path": path.rsplit("/", 1)[0]})
                blocks.append(b'{"type":"toolCall","id":"%s","name":"%s","arguments":%s}' % (cid.encode(), name.encode(), args))
                calls.append((cid, name))
        out_tokens = rng.randint(20, 200) + sum(len(b) for b in blocks) // 4
        if calls:
            stop = b"toolUse"
        else:
            stop = b"stop" if rng.random() < 0.97 else rng.choice([b"length", b"error", b"aborted"])
        tail = b""
        if stop == b"error":
            tail = b',"errorMessage":"' + jstr("529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}")[1:-1] + b'"'
        self.emit(b'{%s,"message":{"role":"assistant","content":[%s],"api":"%s","provider":"%s","model":"%s","usage":%s,"stopReason":"%s","timestamp":%d%s}}' % (
            head, b",".join(blocks), m[1].encode(), m[0].encode(), m[2].encode(),
            self.usage_obj(out_tokens), stop, self.t, tail))
        self.tokens += out_tokens
        return calls

    def tool_result(self, cid: str, name: str) -> None:
        rng = self.rng
        head, _ = self.base("message", 20, 20000)
        r = rng.random()
        if r < 0.55:
            n = rng.randint(20, 600)
        elif r < 0.85:
            n = rng.randint(600, 4000)
        elif r < 0.95:
            n = rng.randint(4000, 20000)
        else:
            n = rng.randint(20000, 50000)
        n = sz(n)
        # don't overshoot the planned session size by a whole big tool result
        n = min(n, max(20, self.target - self.size))
        if name in ("edit", "write"):
            n = rng.randint(30, 120)
            text = jstr(f"Successfully replaced text in src/{rng.choice(IDENTS)}.rs.")[1:-1]
        else:
            text = CODE.take(rng, n)
        is_err = rng.random() < 0.05
        details = b""
        if name == "edit" and not is_err:
            details = b',"details":{"diff":"' + CODE.take(rng, sz(rng.randint(200, 3000))) + b'","firstChangedLine":%d}' % rng.randint(1, 900)
        elif name == "bash" and rng.random() < 0.1:
            details = b',"details":{"truncation":{"truncated":true,"truncatedBy":"bytes","totalLines":%d,"outputLines":2000}}' % rng.randint(2000, 90000)
        elif is_err:
            details = b',"details":{}'
        self.emit(b'{%s,"message":{"role":"toolResult","toolCallId":"%s","toolName":"%s","content":[{"type":"text","text":"%s"}]%s,"isError":%s,"timestamp":%d}}' % (
            head, cid.encode(), name.encode(), text, details, b"true" if is_err else b"false", self.t))
        self.tokens += n // 4

    def bash_execution(self) -> None:
        rng = self.rng
        head, _ = self.base("message", 2000, 60000)
        out = CODE.take(rng, sz(rng.randint(30, 3000)))
        self.emit(b'{%s,"message":{"role":"bashExecution","command":"git log --oneline | head -20","output":"%s","exitCode":0,"cancelled":false,"truncated":false,"timestamp":%d}}' % (head, out, self.t))

    def compaction(self) -> None:
        rng = self.rng
        keep = self.id_list[max(0, len(self.id_list) - rng.randint(3, 30))]
        head, _ = self.base("compaction", 10000, 60000)
        summary = b"## Goal\\n" + PROSE.take(rng, rng.randint(300, 1200)) + b"\\n\\n## Progress\\n" + PROSE.take(rng, rng.randint(800, 5000))
        files = jb({"readFiles": [f"src/{rng.choice(IDENTS)}.rs" for _ in range(rng.randint(1, 12))],
                    "modifiedFiles": [f"src/{rng.choice(IDENTS)}.rs" for _ in range(rng.randint(0, 6))]})
        sysmsg = b""
        if rng.random() < 0.5:
            sysmsg = b',"systemMessage":{"role":"system","content":"","sections":' + SYSTEM_SECTIONS + b',"toolsAdded":' + TOOLS_ADDED + b',"timestamp":%d}' % self.t
        self.emit(b'{%s,"summary":"%s","firstKeptEntryId":"%s","tokensBefore":%d,"details":%s,"fromHook":false%s}' % (
            head, summary, keep.encode(), self.tokens, files, sysmsg))
        self.tokens = rng.randint(8000, 30000)

    def branch(self) -> None:
        """Move the leaf back to an earlier entry (a user message's parent) and maybe summarize."""
        rng = self.rng
        if len(self.user_ids) < 2:
            return
        old_leaf = self.leaf
        # the new branch continues from an earlier entry; pick one from the id list
        target = self.id_list[rng.randrange(max(1, len(self.id_list) // 4), len(self.id_list) - 1)]
        self.leaf = target
        if rng.random() < 0.6:
            head, _ = self.base("branch_summary", 2000, 20000)
            self.emit(b'{%s,"fromId":"%s","summary":"%s","details":{"readFiles":[],"modifiedFiles":[]},"fromHook":false}' % (
                head, old_leaf.encode(), PROSE.take(rng, sz(rng.randint(200, 2500)))))

    def label(self) -> None:
        rng = self.rng
        target = rng.choice(self.id_list)
        head, _ = self.base("label", 500, 5000)
        self.emit(b'{%s,"targetId":"%s","label":"%s"}' % (head, target.encode(), rng.choice(["checkpoint", "good", "before-refactor", "wip", "bug repro"]).encode()))

    def session_info(self) -> None:
        rng = self.rng
        head, _ = self.base("session_info", 200, 3000)
        name = rng.choice(NAMES).format(a=rng.choice(IDENTS), b=rng.choice(IDENTS))
        self.emit(b'{%s,"name":%s}' % (head, jstr(name)))

    def custom(self) -> None:
        rng = self.rng
        ct = rng.choice(CUSTOM_TYPES)
        eid = self.new_id()
        ts = self.tick(10, 2000)
        parent = b'"' + self.leaf.encode() + b'"' if self.leaf else b"null"
        if ct == "pi.virtual-model-state":
            data = jb({"provider": self.model[0], "modelId": self.model[2], "state": {"turns": rng.randint(0, 50), "lastRoute": "primary"}})
        else:
            data = jb({"items": [{"id": i, "text": " ".join(rng.choice(WORDS) for _ in range(6)), "done": rng.random() < 0.5} for i in range(rng.randint(1, 8))]})
        # custom entries put customType/data before the base fields
        self.emit(b'{"type":"custom","customType":"%s","data":%s,"id":"%s","parentId":%s,"timestamp":"%s"}' % (
            ct.encode(), data, eid.encode(), parent, iso(ts).encode()))
        self.leaf = eid

    def custom_message(self) -> None:
        rng = self.rng
        eid = self.new_id()
        ts = self.tick(10, 2000)
        parent = b'"' + self.leaf.encode() + b'"' if self.leaf else b"null"
        self.emit(b'{"type":"custom_message","customType":"%s","content":"%s","display":%s,"id":"%s","parentId":%s,"timestamp":"%s"}' % (
            rng.choice(CUSTOM_TYPES).encode(), PROSE.take(rng, sz(rng.randint(100, 2000))),
            b"true" if rng.random() < 0.5 else b"false", eid.encode(), parent, iso(ts).encode()))
        self.leaf = eid

    def usage_entry(self) -> None:
        m = self.model
        head, _ = self.base("usage", 60000, 300000)
        self.emit(b'{%s,"kind":"cache_warm","provider":"%s","model":"%s","usage":%s}' % (
            head, m[0].encode(), m[2].encode(), self.usage_obj(0)))


def gen_session(task: tuple) -> tuple[str, int]:
    (idx, seed, outdir, cwd, t0, target, parent_session) = task
    rng = random.Random(f"{seed}:{idx}")
    sid = uuid4(rng)
    s = Session(rng, t0)
    s.target = target
    s.model = rng.choices(MODELS, MODEL_WEIGHTS)[0]
    s.thinking = rng.choice(THINKING)
    hdr = {"type": "session", "version": 3, "id": sid, "timestamp": iso(t0), "cwd": cwd}
    if parent_session:
        hdr["parentSession"] = parent_session
    s.emit(jb(hdr))
    s.size = 0  # size accounting excludes the header, so OUTDIR (in parentSession) can't change the content
    s.model_change()
    s.thinking_change()
    if rng.random() < 0.92:
        # (the small mix starts with the short system message, not the ~9 KB full one)
        s.system_message(full=SCALE == 1.0)
    named = rng.random() < 0.35
    if named and rng.random() < 0.5:
        s.session_info()
        named = False
    compact_every = rng.randint(400_000, 1_500_000)
    next_compact = compact_every
    while True:
        s.user()
        for _ in range(rng.randint(0, 25)):
            calls = s.assistant(final=False)
            for cid, name in calls:
                s.tool_result(cid, name)
            if s.size >= target:
                break
        s.assistant(final=True)
        if s.size >= target:
            break
        r = rng.random()
        if r < 0.05:
            s.branch()
        elif r < 0.08:
            s.label()
        elif r < 0.12:
            s.custom()
        elif r < 0.14:
            s.custom_message()
        elif r < 0.16:
            s.usage_entry()
        elif r < 0.18:
            s.bash_execution()
        elif r < 0.20:
            s.model = rng.choices(MODELS, MODEL_WEIGHTS)[0]
            s.model_change()
        elif r < 0.21:
            s.thinking = rng.choice(THINKING)
            s.thinking_change()
        elif r < 0.22:
            s.system_message(full=False)
        elif r < 0.225 and s.size > 20000:
            s.compaction()
        if named and rng.random() < 0.3:
            s.session_info()
            named = False
        if s.size >= next_compact:
            s.compaction()
            next_compact += compact_every
    d = os.path.join(outdir, "sessions", encode_cwd(cwd))
    fname = iso(t0).replace(":", "-").replace(".", "-") + "_" + sid + ".jsonl"
    path = os.path.join(d, fname)
    s.out.append(b"")
    with open(path, "wb", buffering=0) as f:
        f.write(b"\n".join(s.out))
    mt = s.t / 1000.0
    os.utime(path, (mt, mt))
    return path, s.size


# --------------------------------------------------------------------------
# plan

def make_cwds(rng: random.Random, n: int) -> list[str]:
    users = ["ann", "bob", "dev"]
    roots = ["projects", "src", "work", "code/github.com/acme", "repos"]
    names = ["pi-mono", "webapp", "api-server", "infra", "dotfiles", "ml-pipeline", "docs-site", "cli-tools",
             "game-engine", "compiler", "data-etl", "mobile-app", "billing", "auth-service", "scratch",
             "blog", "kernel-module", "notebooks", "search", "crawler"]
    out = []
    seen = set()
    while len(out) < n:
        c = f"/home/{rng.choice(users)}/{rng.choice(roots)}/{rng.choice(names)}"
        if rng.random() < 0.3:
            c += "/" + rng.choice(["packages/core", "frontend", "backend", "crates/parser", "tools"])
        if rng.random() < 0.05:
            c = "/tmp/" + rng.choice(names) + "-" + str(rng.randint(1, 999))
        if rng.random() < 0.03:
            c = f"/home/{rng.choice(users)}/Mes Documents/projet été"
        if c in seen:
            continue
        seen.add(c)
        out.append(c)
    return out


def plan(nsessions: int, total: int, seed: int, ncwds: int, mix: str = "default") -> list[tuple]:
    rng = random.Random(f"plan:{seed}")
    cwds = make_cwds(rng, ncwds)
    cwd_w = [1.0 / (i + 1) ** 0.9 for i in range(ncwds)]  # zipf-ish: a few busy projects
    # heavy-tailed sizes: lognormal body (median ~120 KB) + pareto tail, capped
    sizes = []
    for _ in range(nsessions):
        if mix == "small":
            # sessions of similar size (the total / count), no multi-MB tail
            v = rng.lognormvariate(0.0, 0.3)
        elif rng.random() < 0.015:
            v = 1.5e6 * rng.paretovariate(1.3)
        else:
            v = rng.lognormvariate(math.log(120e3), 0.7)
        sizes.append(min(v, 12e6))
    # a session stops at the first turn boundary past its target, so it overshoots by ~12 KB on
    # average (closing assistant message, last tool results); plan for that.
    overshoot = 12_000 if mix == "default" else 1_500
    scale = max(total - nsessions * overshoot, total * 0.5) / sum(sizes)
    sizes = [max(3000, int(v * scale)) for v in sizes]
    end = 1772323200000  # 2026-03-01T00:00:00Z
    span = 200 * 86400 * 1000
    tasks = []
    by_cwd: dict[str, bool] = {}
    for i in range(nsessions):
        cwd = rng.choices(cwds, cwd_w)[0]
        t0 = end - rng.randrange(span)
        # ~4% of sessions are forks (header.parentSession); resolved to a real path in main()
        parent = True if (cwd in by_cwd and rng.random() < 0.04) else None
        tasks.append([i, seed, None, cwd, t0, sizes[i], parent])
        by_cwd[cwd] = True
    return tasks, cwds


MARKER = ".pi-bench-gen.json"  # written to OUTDIR (not sessions/) when generation completed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir")
    ap.add_argument("--sessions", type=int, default=10000)
    ap.add_argument("--total-bytes", default="2G", help="approximate total size, e.g. 2G, 40M")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cwds", type=int, default=60)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--line-mix", choices=sorted(LINE_MIXES), default="default",
                    help="content sizes: default (heavy-tailed, big tool results) or small "
                         "(many short lines, ~510 B/line: real pi sessions)")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--force", action="store_true", help="write even if OUTDIR/sessions is not empty")
    a = ap.parse_args()

    total = parse_size(a.total_bytes)
    outdir = os.path.abspath(a.outdir)
    t_start = time.time()
    sessions_dir = os.path.join(outdir, "sessions")
    if os.path.isdir(sessions_dir) and os.listdir(sessions_dir) and not a.force:
        print(f"error: {sessions_dir} already exists and is not empty; delete it or pass --force "
              "(--force overwrites same-named files but leaves other files in place)", file=sys.stderr)
        return 1
    marker = os.path.join(outdir, MARKER)
    if os.path.exists(marker):
        os.remove(marker)
    global SCALE
    SCALE = LINE_MIXES[a.line_mix]
    tasks, cwds = plan(a.sessions, total, a.seed, a.cwds, a.line_mix)
    used_cwds = sorted({t[3] for t in tasks})
    for c in used_cwds:
        os.makedirs(os.path.join(outdir, "sessions", encode_cwd(c)), exist_ok=True)
    # parentSession: point at a real (earlier-planned) session path of the same cwd.
    # Paths need the uuid, which is derived from the per-session RNG; recompute cheaply.
    paths = []
    for t in tasks:
        i, seed, _, cwd, t0, _, _ = t
        sid = uuid4(random.Random(f"{seed}:{i}"))
        paths.append(os.path.join(outdir, "sessions", encode_cwd(cwd),
                                  iso(t0).replace(":", "-").replace(".", "-") + "_" + sid + ".jsonl"))
    prng = random.Random(f"parents:{a.seed}")
    for n, t in enumerate(tasks):
        t[2] = outdir
        if t[6] is not None:
            same = [k for k in range(max(0, n - 400), n) if tasks[k][3] == t[3]]
            t[6] = paths[prng.choice(same)] if same else None
    tasks = [tuple(t) for t in tasks]

    init_shared(a.seed)
    written = 0
    done = 0
    if a.jobs > 1:
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(a.jobs) as pool:
            for _, size in pool.imap_unordered(gen_session, tasks, chunksize=8):
                written += size
                done += 1
                if not a.quiet and done % 500 == 0:
                    print(f"\r{done}/{len(tasks)} sessions, {written / 1e9:.2f} GB", end="", file=sys.stderr)
    else:
        for t in tasks:
            _, size = gen_session(t)
            written += size
            done += 1
            if not a.quiet and done % 500 == 0:
                print(f"\r{done}/{len(tasks)} sessions, {written / 1e9:.2f} GB", end="", file=sys.stderr)
    dt = time.time() - t_start
    with open(marker, "w") as f:
        json.dump({"generator": "bench/gen-sessions.py", "lineMix": a.line_mix, "sessions": a.sessions, "totalBytesRequested": total,
                   "bytesWritten": written, "seed": a.seed, "cwds": len(used_cwds), "seconds": round(dt, 1)}, f)
        f.write("\n")
    if not a.quiet:
        print(f"\rwrote {done} sessions in {len(used_cwds)} cwds, {written} bytes ({written / 1e9:.2f} GB) "
              f"to {outdir}/sessions in {dt:.1f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
