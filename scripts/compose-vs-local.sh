#!/bin/sh
# The default bench on `local` and on compose from inside the project network (the bench
# service), same seed, interleaved: local, compose, local, compose, ... (REPEATS of each,
# default 2), then a table backend x workload: the mean acquisitions per second of each side,
# compose / local as the mean of the per-pair ratios, and the spread of those ratios.
#
#   sh scripts/compose-vs-local.sh            # after `docker compose build` (docs/docker.md)
#   REPEATS=3 SEED=7 sh scripts/compose-vs-local.sh -- --backends redis,etcd
#
# Extra dlbench arguments after `--` go to both sides. The compose project is
# COMPOSE_PROJECT_NAME (default dlbench, from .env); the services are started with `up -d`
# if they are not running and left running. Results: results/compose-vs-local-<time>/.
# Needs: docker compose or docker-compose, python3, target/release/dlbench.
set -eu
cd "$(dirname "$0")/.."
REPEATS=${REPEATS:-2}
SEED=${SEED:-1}
[ "${1:-}" = "--" ] && shift
case "$REPEATS" in ''|*[!0-9]*|0|1) echo "compose-vs-local: REPEATS=$REPEATS: give 2 or more (a spread needs two pairs)" >&2; exit 2 ;; esac
case "$SEED" in ''|*[!0-9]*) echo "compose-vs-local: SEED=$SEED: give a whole number" >&2; exit 2 ;; esac
[ -x target/release/dlbench ] || { echo "compose-vs-local: no target/release/dlbench: run cargo build --release first" >&2; exit 2; }
command -v python3 >/dev/null || { echo "compose-vs-local: needs python3 for the table" >&2; exit 2; }
if docker compose version >/dev/null 2>&1; then compose="docker compose"
elif command -v docker-compose >/dev/null; then compose="docker-compose"
else echo "compose-vs-local: neither docker compose nor docker-compose is installed" >&2; exit 2; fi

out=results/compose-vs-local-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
$compose up -d >/dev/null 2>&1 || $compose up -d
$compose build bench >/dev/null
i=1
while [ "$i" -le "$REPEATS" ]; do
    echo "compose-vs-local: pair $i of $REPEATS: local" >&2
    target/release/dlbench run --seed "$SEED" --out "$out/local-$i" "$@" >"$out/local-$i.log" 2>&1 \
        || { echo "compose-vs-local: local run $i failed, see $out/local-$i.log" >&2; exit 1; }
    echo "compose-vs-local: pair $i of $REPEATS: compose (bench service)" >&2
    # The bench container sees ./results as results/ (docker-compose.yml).
    $compose run --rm bench run --seed "$SEED" --out "$out/compose-$i" "$@" >"$out/compose-$i.log" 2>&1 \
        || { echo "compose-vs-local: compose run $i failed, see $out/compose-$i.log" >&2; exit 1; }
    i=$((i + 1))
done
python3 - "$out" "$REPEATS" <<'PY'
import glob, json, sys
out, n = sys.argv[1], int(sys.argv[2])
def rates(side, i):
    f = [p for p in glob.glob(f"{out}/{side}-{i}/*/summary.json") if "/latest/" not in p]
    if len(f) != 1:
        sys.exit(f"compose-vs-local: expected one summary.json under {out}/{side}-{i}, found {len(f)}")
    d = json.load(open(f[0]))
    return {(b["name"], w["name"]): w["ops_per_sec"] for b in d["backends"] for w in b["workloads"]}
local = [rates("local", i) for i in range(1, n + 1)]
comp = [rates("compose", i) for i in range(1, n + 1)]
print(f"| backend | workload | local acq/s | compose acq/s | compose / local | spread ({n} pairs) |")
print("|---|---|---:|---:|---:|---|")
for key in sorted(local[0]):
    l = [r.get(key, 0.0) for r in local]
    c = [r.get(key, 0.0) for r in comp]
    ratios = [ci / li for li, ci in zip(l, c) if li > 0]
    if not ratios:
        continue
    mean = sum(ratios) / len(ratios)
    flag = " (below 0.8)" if mean < 0.8 else ""
    print(f"| {key[0]} | {key[1]} | {sum(l)/n:.0f} | {sum(c)/n:.0f} | {mean:.2f}{flag} | {min(ratios):.2f}-{max(ratios):.2f} |")
print(f"\nruns: {out}/{{local,compose}}-1..{n}")
PY
