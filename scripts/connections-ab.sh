#!/bin/sh
# Per-client connections against shared ones, side by side: the same servers (one local
# target per run, same seed), interleaved A B A B, and the ratio per backend x workload with
# its spread over the repeats.
#
#   sh scripts/connections-ab.sh [REPEATS=3] [DURATION=5s] [BACKENDS=postgres,redis,redlock,etcd]
set -eu
repeats=${1:-3}
duration=${2:-5s}
backends=${3:-postgres,redis,redlock,etcd}
bin=${DLBENCH:-./target/release/dlbench}
[ -x "$bin" ] || { echo "connections-ab: $bin not found; run cargo build --release first" >&2; exit 2; }
out=$(mktemp -d /tmp/dlbench-conns-ab.XXXXXX)
seed=${SEED:-42}
i=1
while [ "$i" -le "$repeats" ]; do
    for mode in shared per-client; do
        "$bin" run --backends "$backends" --duration "$duration" --seed "$seed" --connections "$mode" \
            --out "$out/$mode-$i" --no-fail-on-violation >/dev/null 2>"$out/$mode-$i.log" \
            || { echo "connections-ab: run $mode #$i failed, see $out/$mode-$i.log" >&2; exit 1; }
    done
    i=$((i + 1))
done
python3 - "$out" "$repeats" <<'PY'
import json, sys, glob, statistics
out, n = sys.argv[1], int(sys.argv[2])
def rates(mode, i):
    s = json.load(open(glob.glob(f"{out}/{mode}-{i}/latest/summary.json")[0]))
    return {(b["name"], w["name"]): w["ops_per_sec"] for b in s["backends"] for w in b["workloads"]}
rows = {}
for i in range(1, n + 1):
    sh, pc = rates("shared", i), rates("per-client", i)
    for k in pc:
        if sh.get(k):
            rows.setdefault(k, []).append((sh[k], pc[k], pc[k] / sh[k]))
print(f"| backend | workload | shared acq/s (median) | per-client acq/s (median) | per-client / shared: median [min - max] over {n} |")
print("|---|---|---:|---:|---:|")
for (b, w), v in rows.items():
    r = [x[2] for x in v]
    print(f"| {b} | {w} | {statistics.median(x[0] for x in v):.0f} | {statistics.median(x[1] for x in v):.0f} | "
          f"{statistics.median(r):.2f} [{min(r):.2f} - {max(r):.2f}] |")
PY
rm -rf "$out"
