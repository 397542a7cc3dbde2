#!/bin/sh
# Compose against local, like for like: the same bench on the `local` target and from the
# compose file's bench service (inside the project network), same seed, interleaved (local,
# compose, local, compose, ...; REPEATS pairs, default 3), each side on fresh servers: the
# local target starts new server processes on new data every run, so before each compose run
# the project's servers are recreated on new volumes (`down -v`, `up -d`) rather than left
# warm from the run before (ZooKeeper's JVM sped up 168 -> 287 -> 314 acq/s across warm runs).
#
# Prints one row per backend x workload: the median acquisitions per second of each side
# with their range, compose / local as the median of the per-pair ratios with their range,
# and for a row outside [0.8, 1.25] what `dlbench compare` says the container layer explains
# (the network round trip, under load and idle, and the fsync latency each run measured and
# recorded), on the runs of each side pooled: each figure the median over the runs, beside
# the share each pair alone gave (one run's measurement is one short burst).
#
#   sh scripts/compose-vs-local.sh            # after `docker compose build` (docs/docker.md)
#   REPEATS=5 SEED=7 sh scripts/compose-vs-local.sh -- --backends redlock,etcd
#
# Extra dlbench arguments after `--` go to both sides, which run --preset speed (the speed
# workloads: a fault round would make the pairs unlike; default: those with
# --duration 5s). The compose project is COMPOSE_PROJECT_NAME (default dlbench, from .env):
# its servers and volumes are recreated (FRESH=0 keeps them as they are, warm). Results:
# results/compose-vs-local-<time>/ (table.md, the runs, compare-<i>.txt, compare-pooled.txt).
# Needs: docker compose or docker-compose, python3, target/release/dlbench.
set -eu
cd "$(dirname "$0")/.."
REPEATS=${REPEATS:-3}
SEED=${SEED:-7}
FRESH=${FRESH:-1}
[ "${1:-}" = "--" ] && shift
case "$REPEATS" in ''|*[!0-9]*|0|1) echo "compose-vs-local: REPEATS=$REPEATS: give 2 or more (a range needs two pairs)" >&2; exit 2 ;; esac
case "$SEED" in ''|*[!0-9]*) echo "compose-vs-local: SEED=$SEED: give a whole number" >&2; exit 2 ;; esac
case "$FRESH" in 0|1) ;; *) echo "compose-vs-local: FRESH=$FRESH: give 1 (new servers each run) or 0 (keep them)" >&2; exit 2 ;; esac
[ -x target/release/dlbench ] || { echo "compose-vs-local: no target/release/dlbench: run cargo build --release first" >&2; exit 2; }
command -v python3 >/dev/null || { echo "compose-vs-local: needs python3 for the table" >&2; exit 2; }
if docker compose version >/dev/null 2>&1; then compose="docker compose"
elif command -v docker-compose >/dev/null; then compose="docker-compose"
else echo "compose-vs-local: neither docker compose nor docker-compose is installed" >&2; exit 2; fi
[ $# -gt 0 ] || set -- --duration 5s

out=results/compose-vs-local-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
# Nothing left behind: a project that was not up before the script is brought down (with its
# volumes) however the script ends; one that was up is left up.
if [ -z "$($compose ps -q 2>/dev/null)" ]; then
    trap '$compose down -v >/dev/null 2>&1' EXIT
    trap 'exit 130' INT TERM
fi
$compose --profile bench build bench >/dev/null
$compose up -d >/dev/null 2>&1 || $compose up -d
i=1
while [ "$i" -le "$REPEATS" ]; do
    echo "compose-vs-local: pair $i of $REPEATS: local" >&2
    target/release/dlbench run --preset speed --seed "$SEED" --out "$out/local-$i" "$@" >"$out/local-$i.log" 2>&1 \
        || { echo "compose-vs-local: local run $i failed, see $out/local-$i.log" >&2; exit 1; }
    if [ "$FRESH" = 1 ]; then
        echo "compose-vs-local: pair $i of $REPEATS: fresh compose servers (down -v, up -d)" >&2
        $compose down -v >/dev/null 2>&1
        $compose up -d >/dev/null 2>&1 || $compose up -d
    fi
    echo "compose-vs-local: pair $i of $REPEATS: compose (bench service)" >&2
    # The bench container sees ./results as results/ (docker-compose.yml); the run waits for
    # the services' health checks itself.
    $compose run --rm bench run --preset speed --seed "$SEED" --out "$out/compose-$i" "$@" >"$out/compose-$i.log" 2>&1 \
        || { echo "compose-vs-local: compose run $i failed, see $out/compose-$i.log" >&2; exit 1; }
    # compare reads both runs' recorded round trips and fsync latencies and says what part
    # of each difference the container layer explains (exit 3 = a change flagged: expected).
    # --allow-mismatch: the targets differ on purpose (the comparison says so).
    target/release/dlbench compare --allow-mismatch --json "$out/compare-$i.json" "$out/local-$i/latest" "$out/compose-$i/latest" \
        >"$out/compare-$i.txt" 2>&1 || true
    i=$((i + 1))
done
# Every run of a side pooled (a directory of runs is one side to `compare`): each rate is the
# median over the runs, and each measured cost the median of the runs' figures, so one run
# whose measurement landed in a busy moment does not decide the note.
for side in local compose; do
    mkdir -p "$out/pooled-$side"
    for d in "$out/$side"-*/*/; do
        [ -f "$d/summary.json" ] && [ "$(basename "$d")" != latest ] && ln -s "../${d#"$out"/}" "$out/pooled-$side/$(basename "$(dirname "$d")")"
    done
done
target/release/dlbench compare --allow-mismatch --json "$out/compare-pooled.json" "$out/pooled-local" "$out/pooled-compose" \
    >"$out/compare-pooled.txt" 2>&1 || true
python3 - "$out" "$REPEATS" <<'PY' | tee "$out/table.md"
import glob, json, re, statistics, sys
out, n = sys.argv[1], int(sys.argv[2])

def summary(side, i):
    f = [p for p in glob.glob(f"{out}/{side}-{i}/*/summary.json") if "/latest/" not in p]
    if len(f) != 1:
        sys.exit(f"compose-vs-local: expected one summary.json under {out}/{side}-{i}, found {len(f)}")
    return json.load(open(f[0]))

def rates(d):
    return {(b["name"], w["name"]): w["ops_per_sec"] for b in d["backends"] for w in b["workloads"]}

local = [summary("local", i) for i in range(1, n + 1)]
comp = [summary("compose", i) for i in range(1, n + 1)]
lr, cr = [rates(d) for d in local], [rates(d) for d in comp]

def span(xs, fmt):
    return f"{fmt(statistics.median(xs))} [{fmt(min(xs))}-{fmt(max(xs))}]"

def note(i, key):
    """compare's container-layer note for this backend x workload in pair i, or in the
    pooled comparison for i = "pooled" (its `target_costs`: each starts "backend · workload (")."""
    try:
        notes = json.load(open(f"{out}/compare-{i}.json")).get("target_costs", [])
    except (OSError, ValueError):
        return None
    return next((x for x in notes if x.startswith(f"{key[0]} · {key[1]} (")), None)

def share(text):
    """The share a note states ("explain ~1.09 ms (95%)"), or None."""
    m = re.search(r"explain ~-?[0-9.]+ [µm]?s \((-?[0-9]+)%\)", text or "")
    return int(m.group(1)) if m else None

print(f"| backend | workload | local acq/s | compose acq/s | compose / local ({n} pairs) | |")
print("|---|---|---:|---:|---:|---|")
outside = []
for key in sorted(lr[0]):
    l = [r.get(key, 0.0) for r in lr]
    c = [r.get(key, 0.0) for r in cr]
    pairs = [(ci / li, i + 1) for i, (li, ci) in enumerate(zip(l, c)) if li > 0]
    if not pairs:
        print(f"| {key[0]} | {key[1]} | {span(l, lambda x: f'{x:.0f}')} | {span(c, lambda x: f'{x:.0f}')} | - | nothing acquired on local |")
        continue
    ratios = [r for r, _ in pairs]
    med = statistics.median(ratios)
    within = 0.8 <= med <= 1.25
    if not within:
        # The pair whose ratio is the median (the lower middle one for an even count).
        mid = sorted(pairs)[(len(pairs) - 1) // 2][1]
        outside.append((key, mid))
    print(f"| {key[0]} | {key[1]} | {span(l, lambda x: f'{x:.0f}')} | {span(c, lambda x: f'{x:.0f}')} | "
          f"{span(ratios, lambda x: f'{x:.2f}')} | {'within 0.8-1.25' if within else 'OUTSIDE 0.8-1.25'} |")

def costs(d):
    return d.get("target_costs") or {}

print()
print("Measured by each run before its phases (median over the runs of each node's median):")
for side, runs in (("local", local), ("compose", comp)):
    rtt, fs, ld = {}, {}, {}
    for d in runs:
        m = costs(d)
        for l in m.get("loaded", []):
            if l.get("median_us") is not None and l.get("per_second") is not None:
                ld.setdefault(l["service"], []).append((l["median_us"], l["p90_us"], l["per_second"]))
        for r in m.get("round_trips", []):
            if r.get("median_us") is not None:
                rtt.setdefault((r["service"], r.get("via", "")), []).append(r["median_us"])
        for f in m.get("fsync", []):
            if f.get("median_us") is not None:
                fs.setdefault(f.get("kind", "?"), []).append(f["median_us"])
    if not rtt and not fs:
        print(f"- {side}: no round trip or fsync recorded (a dlbench without `target_costs`?)")
        continue
    via = sorted({v for _, v in rtt})
    parts = [f"{s} {statistics.median(v):.0f} us" for (s, _), v in sorted(rtt.items())]
    print(f"- {side}: round trip ({', '.join(via) or '-'}) " + (", ".join(parts) or "not measured")
          + "; fsync of 4 KiB " + (", ".join(f"{k.replace('_', ' ')} {statistics.median(v):.0f} us" for k, v in sorted(fs.items())) or "not measured"))
    if ld:
        print(f"  {side} under load (8 connections to every node at once): " + ", ".join(
            f"{s} {statistics.median(x[0] for x in v):.0f} us (p90 {statistics.median(x[1] for x in v):.0f}, {statistics.median(x[2] for x in v):.0f} req/s)"
            for s, v in sorted(ld.items())))
if outside:
    print()
    print(f"What the container layer explains where compose / local is outside 0.8-1.25 (dlbench compare on the {n} runs of each side pooled: "
          "each rate and each measured cost the median over the runs), with the share each pair alone gave:")
    for key, _ in outside:
        pairs = [share(note(i, key)) for i in range(1, n + 1)]
        each = ", ".join("-" if x is None else f"{x}%" for x in pairs)
        print(f"- {note('pooled', key) or f'{key[0]} · {key[1]}: compare gave no target-costs note (see compare-pooled.txt)'}"
              f" [pairs alone: {each}]")
print(f"\nruns: {out}/{{local,compose}}-1..{n}; comparisons: {out}/compare-1..{n}.txt and .json, pooled: {out}/compare-pooled.txt")
PY
