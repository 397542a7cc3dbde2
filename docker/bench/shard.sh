#!/bin/sh
# dlbench-shard: one shard of a plan, in a container an engine started N copies of.
#
#   dlbench-shard [dlbench run arguments...]
#
# The engine numbers the copies; this script turns its number into `--shard I/N` and gives
# the shard its own result directory, then runs `dlbench run`:
#   DLBENCH_SHARD_INDEX   the index, from 0, when you set it yourself;
#   JOB_COMPLETION_INDEX  a Kubernetes Indexed Job's completion index (from 0);
#   DLBENCH_SHARD_SLOT    a Docker Swarm task slot, "{{.Task.Slot}}" (from 1);
#   otherwise             compose `--scale`: the container's number (from 1), read from its
#                         com.docker.compose.container-number label through the mounted
#                         Docker socket.
# DLBENCH_SHARDS is N. DLBENCH_START_AT (Unix seconds, the same for every copy) starts them
# together; `dlbench run` reads it, and DLBENCH_RESOURCE, itself. Results go to
# ${DLBENCH_SHARD_OUT:-results/shards}/shard-I; `dlbench merge` takes those directories.
set -eu
n="${DLBENCH_SHARDS:-}"
case "$n" in
    ''|*[!0-9]*) echo "dlbench-shard: set DLBENCH_SHARDS to the number of shards (got '${n}')" >&2; exit 2 ;;
esac
if [ -n "${DLBENCH_SHARD_INDEX:-}" ]; then
    i=$DLBENCH_SHARD_INDEX
elif [ -n "${JOB_COMPLETION_INDEX:-}" ]; then
    i=$JOB_COMPLETION_INDEX
elif [ -n "${DLBENCH_SHARD_SLOT:-}" ]; then
    i=$((DLBENCH_SHARD_SLOT - 1))
else
    num=$(docker inspect --format '{{index .Config.Labels "com.docker.compose.container-number"}}' "$(hostname)" 2>/dev/null || true)
    case "$num" in
        ''|*[!0-9]*) echo "dlbench-shard: cannot tell which shard this container is: set DLBENCH_SHARD_INDEX, or run it as compose --scale (Docker socket mounted), a Kubernetes Indexed Job or a Swarm service with DLBENCH_SHARD_SLOT={{.Task.Slot}}" >&2; exit 2 ;;
    esac
    i=$((num - 1))
fi
# An empty DLBENCH_START_AT (compose passes unset variables through as empty) means none.
[ -n "${DLBENCH_START_AT:-}" ] || unset DLBENCH_START_AT
[ -n "${DLBENCH_RESOURCE:-}" ] || unset DLBENCH_RESOURCE
exec dlbench run --shard "$i/$n" --out "${DLBENCH_SHARD_OUT:-results/shards}/shard-$i" "$@"
