#!/bin/sh
# The command of one pod of the Indexed Job (job.yaml): pod N runs line
# N+1 of the tasks file with pi-run, as session task-N in the shared
# sessions folder. The pod's exit status is pi-run's (0 done, 1 failed,
# 2 usage, 3 a limit, 4 output schema); its stdout (the JSON events,
# ending with run_end) goes to the pod log. Afterwards
# `pi-session stats --all --session-dir <folder>` reports every run.
set -eu
index=${JOB_COMPLETION_INDEX:?JOB_COMPLETION_INDEX is not set}
tasks=${TASKS_FILE:-/tasks/tasks.txt}
sessions=${SESSIONS_DIR:-/sessions}
task=$(sed -n "$((index + 1))p" "$tasks")
if [ -z "$task" ]; then
    echo "run-task: no task on line $((index + 1)) of $tasks" >&2
    exit 2
fi
# PI_RUN_ARGS: extra flags (model, limits), split on spaces.
# shellcheck disable=SC2086
exec pi-run --no-approve --mode json --session-dir "$sessions" \
    --session-id "task-$index" ${PI_RUN_ARGS:-} "$task"
