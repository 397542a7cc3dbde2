#!/bin/sh
# Three dlbench shards as a Docker Swarm service on a one-node swarm, against the compose
# servers, their sections on the compose `resource` Redis; then `dlbench merge`.
#
#   sh scripts/swarm-shards.sh [SHARDS]        (default 3; needs the images: docs/docker.md)
#
# Joins nothing and leaves nothing: a swarm it had to create (listening on 127.0.0.1 only)
# is left again, the stack is removed, and the compose services it started are stopped.
# The merged result is results/swarm-<time>/merged; the exit status is the merge's verdict.
set -eu
cd "$(dirname "$0")/.."
shards=${1:-3}
if docker compose version >/dev/null 2>&1; then compose="docker compose"; else compose="docker-compose"; fi
for img in dlbench/bench:bookworm dlbench/redis:bookworm; do
    docker image inspect "$img" >/dev/null 2>&1 || { echo "swarm-shards: no image $img: build them first (cargo build --release; $compose build; $compose --profile bench build bench)" >&2; exit 2; }
done
stack=dlbench-shards
out="results/swarm-$(date -u +%Y%m%d-%H%M%S)"
mkdir -p "$out"
created_swarm=0
started=""
cleanup() {
    docker stack rm "$stack" >/dev/null 2>&1 || true
    # The stack's tasks are gone before the swarm is left.
    i=0; while [ $i -lt 30 ] && docker ps -aq --filter "label=com.docker.stack.namespace=$stack" | grep -q .; do sleep 1; i=$((i + 1)); done
    [ $created_swarm = 1 ] && docker swarm leave --force >/dev/null 2>&1 || true
    [ -n "$started" ] && $compose --profile shards stop $started >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if [ "$(docker info --format '{{.Swarm.LocalNodeState}}')" != active ]; then
    docker swarm init --advertise-addr 127.0.0.1 --listen-addr 127.0.0.1:2377 >/dev/null
    created_swarm=1
    echo "swarm-shards: one-node swarm created on 127.0.0.1 (left again at the end)"
fi
# The servers under test and the resource server, unless already up.
for svc in redis resource; do
    if [ -z "$($compose --profile shards ps -q $svc 2>/dev/null)" ] || ! docker inspect -f '{{.State.Running}}' "$($compose --profile shards ps -q $svc)" | grep -q true; then
        started="$started $svc"
    fi
done
[ -z "$started" ] || $compose --profile shards up -d $started
# Healthy before the start: the resource and the lock server answer.
for port in 16379 16390; do
    i=0; until redis-cli -p $port ping >/dev/null 2>&1 || [ $i -ge 60 ]; do sleep 1; i=$((i + 1)); done
done
start_at=$(( $(date +%s) + 25 ))
echo "swarm-shards: $shards shards start at $start_at; results in $out"
DLBENCH_START_AT=$start_at DLBENCH_SHARDS=$shards DLBENCH_RESULTS="$PWD/$out" DLBENCH_SHARD_OUT=results \
    docker stack deploy -c deploy/swarm/stack.yml "$stack" >/dev/null
# Wait for every task to end (a task that cannot start within two minutes fails the script).
deadline=$(( $(date +%s) + 180 ))
while :; do
    states=$(docker service ps "${stack}_shard" --format '{{.CurrentState}}' 2>/dev/null || true)
    done_n=$(printf '%s\n' "$states" | grep -c -E '^(Complete|Failed|Rejected|Shutdown)' || true)
    [ "$done_n" -ge "$shards" ] && break
    [ "$(date +%s)" -lt $deadline ] || { echo "swarm-shards: tasks not done in time:" >&2; printf '%s\n' "$states" >&2; exit 1; }
    sleep 2
done
docker service ps "${stack}_shard" --format '{{.Name}} {{.CurrentState}} {{.Error}}'
failed=$(docker service ps "${stack}_shard" --format '{{.CurrentState}}' | grep -vc '^Complete' || true)
if [ "$failed" -gt 0 ]; then
    echo "swarm-shards: $failed task(s) did not complete; their logs:" >&2
    docker service logs --raw "${stack}_shard" 2>&1 | tail -20 >&2
    exit 1
fi
dirs=""
i=0; while [ $i -lt "$shards" ]; do dirs="$dirs $out/shard-$i"; i=$((i + 1)); done
set +e
./target/release/dlbench merge $dirs --out "$out/merged"
code=$?
exit $code
