#!/usr/bin/env python3
"""Times paired runs for bench/subagents.sh.

usage: subagents-run.py RUNS CHILDREN CWD ERRFILE MOCKTIME_A MOCKTIME_B -- CMD_A... -- CMD_B...

CMD_A is the plain run (no delegation), CMD_B the same client delegating to
CHILDREN subagents; each talks to its own mock, which logs the seconds it
spent on each request (the model's time) to its MOCKTIME file. The two are
run alternately, A then B, RUNS times, so a drift in the machine's load hits
both halves of a pair alike. One line per pair: the wall seconds each run
took outside its mock (A, B), the CPU seconds (user + system) each used with
the children it waited for (A, B), and the overhead per child,
(B - A) / CHILDREN, for wall and for CPU. Exits 1 when a run fails.
"""
import os
import subprocess
import sys
import time


def timed(cmd, cwd, err, mocktime):
    open(mocktime, "w").close()
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        print(f"failed ({code}): {' '.join(cmd)}", file=sys.stderr)
        sys.exit(1)
    with open(mocktime) as f:
        mock = sum(float(x) for x in f if x.strip())
    return wall - mock, ru.ru_utime + ru.ru_stime


def main():
    runs, children = int(sys.argv[1]), int(sys.argv[2])
    cwd, errfile, time_a, time_b = sys.argv[3:7]
    rest = sys.argv[7:]
    if not rest or rest[0] != "--" or "--" not in rest[1:]:
        sys.exit("usage: subagents-run.py RUNS CHILDREN CWD ERRFILE MOCKTIME_A MOCKTIME_B -- CMD_A... -- CMD_B...")
    split = rest.index("--", 1)
    cmd_a, cmd_b = rest[1:split], rest[split + 1:]
    with open(errfile, "a") as err:
        for _ in range(runs):
            wa, ca = timed(cmd_a, cwd, err, time_a)
            wb, cb = timed(cmd_b, cwd, err, time_b)
            print(f"{wa:.6f} {wb:.6f} {ca:.6f} {cb:.6f} "
                  f"{(wb - wa) / children:.6f} {(cb - ca) / children:.6f}", flush=True)


if __name__ == "__main__":
    main()
