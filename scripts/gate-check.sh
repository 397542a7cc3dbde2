#!/bin/sh
# Does `dlbench compare` hold as a regression gate on this machine?
#
# Ten comparisons of the same build against itself, each side `run --repeat 5` (short
# phases, the in-process memory backend, 1 ms holds so that timers rather than raw CPU set
# the pace), must report no regression; one comparison against a deliberately slowed build
# must report one. The slowed build is the same binary with the test hook
# DLBENCH_TEST_HOOK_MEMORY_ACQUIRE_DELAY_US set (every memory acquire sleeps that long
# first; honoured by the memory backend only, and announced on stderr).
#
#   sh scripts/gate-check.sh            # about 4 minutes on 2 cores
#   TRIES=3 sh scripts/gate-check.sh    # fewer same-build comparisons
set -eu
cd "$(dirname "$0")/.."
bin=target/release/dlbench
[ -x "$bin" ] || cargo build --release
tries=${TRIES:-10}
out=target/gate-check
rm -rf "$out"
mkdir -p "$out"

run() { # results-dir [VAR=value]
    dir=$1
    shift
    env "$@" "$bin" run --backends memory --workload many-keys --clients 4 --hold 1ms \
        --duration 1s --warmup 0s --repeat 5 --out "$dir" >"$dir.stdout" 2>"$dir.stderr"
}

compare() { # base new -> prints the verdict line, returns compare's exit status
    set +e
    "$bin" compare "$1/latest" "$2/latest" >"$2.compare.md"
    rc=$?
    set -e
    verdict=$(grep -m1 -E '^\*\*(No regression|[0-9]+ regression)' "$2.compare.md" | tr -d '*')
    echo "$verdict"
    return $rc
}

false_alarms=0
i=1
while [ "$i" -le "$tries" ]; do
    run "$out/same$i-a"
    run "$out/same$i-b"
    set +e
    v=$(compare "$out/same$i-a" "$out/same$i-b")
    rc=$?
    set -e
    echo "same build, try $i: exit $rc: $v"
    [ "$rc" -eq 0 ] || false_alarms=$((false_alarms + 1))
    i=$((i + 1))
done

run "$out/slow-a"
run "$out/slow-b" DLBENCH_TEST_HOOK_MEMORY_ACQUIRE_DELAY_US=2000
set +e
v=$(compare "$out/slow-a" "$out/slow-b")
rc=$?
set -e
echo "slowed build (+2 ms per acquire): exit $rc: $v"
echo "same build: $((tries - false_alarms)) of $tries without a regression; slowed build $([ "$rc" -eq 1 ] && echo caught || echo MISSED)"
echo "(Markdown of each comparison: $out/*.compare.md)"
[ "$false_alarms" -eq 0 ] && [ "$rc" -eq 1 ]
