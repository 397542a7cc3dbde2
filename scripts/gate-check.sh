#!/bin/sh
# Does `dlbench compare` hold as a regression gate on this machine?
#
# Ten comparisons of the same build against itself must report no regression; one
# comparison against a deliberately slowed build must report one. Each comparison takes
# ROUNDS runs per side in turn (A B A B ...), each side's runs in a directory of its own
# that `compare` pools. Phases last 3 s, so that p99 has 10 acquisitions beyond it even on a
# loaded machine (shorter phases leave it unjudged); 1 ms holds, so that timers rather than
# raw CPU set the pace. The slowed build is the same binary with a test hook set: every
# acquire of the backend sleeps 2 ms first (DLBENCH_TEST_HOOK_MEMORY_ACQUIRE_DELAY_US for the
# in-process memory backend, DLBENCH_TEST_HOOK_REDIS_ACQUIRE_DELAY_US for Redis; announced
# on stderr).
#
#   sh scripts/gate-check.sh                  # memory backend, about 4 minutes on 2 cores
#   BACKEND=redis sh scripts/gate-check.sh    # a real server (local target), about 7 minutes
#   TRIES=3 sh scripts/gate-check.sh          # fewer same-build comparisons
#   ROUNDS=5 sh scripts/gate-check.sh         # runs per side (default 4: what compare prints
#                                             # for this plan under its default --gate)
set -eu
cd "$(dirname "$0")/.."
bin=target/release/dlbench
[ -x "$bin" ] || cargo build --release
tries=${TRIES:-10}
rounds=${ROUNDS:-4}
backend=${BACKEND:-memory}
case $backend in
    memory) hook=DLBENCH_TEST_HOOK_MEMORY_ACQUIRE_DELAY_US ;;
    redis) hook=DLBENCH_TEST_HOOK_REDIS_ACQUIRE_DELAY_US ;;
    *) echo "gate-check: BACKEND=$backend has no slowing hook; use memory or redis" >&2; exit 2 ;;
esac
out=target/gate-check-$backend
rm -rf "$out"
mkdir -p "$out"

run() { # results-dir [VAR=value]: one more run into the side's directory
    dir=$1
    shift
    env "$@" "$bin" run --backends "$backend" --workload many-keys --clients 4 --hold 1ms \
        --duration 3s --warmup 0s --out "$dir" >>"$dir.stdout" 2>>"$dir.stderr"
}

pair() { # base-dir new-dir [VAR=value for the new side]: ROUNDS runs each, in turn
    a=$1
    b=$2
    shift 2
    r=1
    while [ "$r" -le "$rounds" ]; do
        run "$a"
        run "$b" "$@"
        r=$((r + 1))
    done
}

compare() { # base new -> prints the verdict line, returns compare's exit status
    set +e
    "$bin" compare "$1" "$2" --format markdown >"$2.compare.md"
    rc=$?
    set -e
    verdict=$(grep -m1 -E '^\*\*(No regression|[0-9]+ (regression|change))' "$2.compare.md" | tr -d '*' | cut -c1-160)
    needed=$(grep -m1 -o 'Runs needed\*\*: at least [0-9]*' "$2.compare.md" | grep -o '[0-9]*$')
    echo "$verdict (runs needed: $needed, taken: $rounds)"
    return $rc
}

false_alarms=0
i=1
while [ "$i" -le "$tries" ]; do
    pair "$out/same$i-a" "$out/same$i-b"
    set +e
    v=$(compare "$out/same$i-a" "$out/same$i-b")
    rc=$?
    set -e
    echo "same build, try $i: exit $rc: $v"
    [ "$rc" -eq 0 ] || false_alarms=$((false_alarms + 1))
    i=$((i + 1))
done

pair "$out/slow-a" "$out/slow-b" "$hook=2000"
set +e
v=$(compare "$out/slow-a" "$out/slow-b")
rc=$?
set -e
echo "slowed build (+2 ms per $backend acquire): exit $rc: $v"
echo "same build: $((tries - false_alarms)) of $tries without a regression; slowed build $([ "$rc" -eq 1 ] && echo caught || echo MISSED)"
echo "(Markdown of each comparison: $out/*.compare.md)"
[ "$false_alarms" -eq 0 ] && [ "$rc" -eq 1 ]
