#!/usr/bin/env python3
"""Times runs of a command for bench/subagents.sh.

usage: subagents-run.py RUNS MOCKTIME CWD ERRFILE CMD...
Runs CMD (in CWD, stdout discarded, stderr appended to ERRFILE) RUNS times
and prints one line per run: the wall seconds minus the seconds the mock
logged in MOCKTIME during the run (emptied before each run), then the
CPU seconds (user + system) of CMD and the children it waited for.
Exits 1 when a run fails.
"""
import os
import subprocess
import sys
import time

runs, mocktime, cwd, errfile, cmd = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
with open(errfile, "a") as err:
    for _ in range(runs):
        open(mocktime, "w").close()
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode != 0:
            print(f"failed ({p.returncode}): {' '.join(cmd)}", file=sys.stderr)
            sys.exit(1)
        with open(mocktime) as f:
            mock = sum(float(x) for x in f if x.strip())
        print(f"{wall - mock:.6f} {ru.ru_utime + ru.ru_stime:.6f}", flush=True)
