#!/bin/sh
# Is calibrate's hand-off bound a bound? RUNS consecutive `dlbench calibrate` runs (each its
# own servers); prints every backend's efficiency (hot-key hand-offs / the bound its critical
# path sets) per run and the highest, and exits 1 if any run put a lock above its bound.
#
#   sh scripts/bound-check.sh            # 5 runs, about 10 minutes on 2 cores
#   RUNS=3 sh scripts/bound-check.sh
set -eu
cd "$(dirname "$0")/.."
bin=target/release/dlbench
[ -x "$bin" ] || cargo build --release
runs=${RUNS:-5}
out=target/bound-check
rm -rf "$out"
mkdir -p "$out"
i=1
while [ "$i" -le "$runs" ]; do
    "$bin" calibrate --out "$out" >"$out/run-$i.stdout" 2>"$out/run-$i.stderr" || {
        echo "bound-check: calibrate run $i failed; see $out/run-$i.stderr" >&2
        exit 2
    }
    i=$((i + 1))
done
python3 - "$out" <<'PY'
import json, pathlib, sys
runs = sorted(p for p in pathlib.Path(sys.argv[1]).iterdir() if (p / "summary.json").exists() and not p.is_symlink())
rows = {}
for r in runs:
    for e in json.loads((r / "summary.json").read_text())["calibration"]["efficiency"]:
        rows.setdefault(e["backend"], []).append(e)
print("| backend | efficiency per run | highest | bound hand-offs/s (range) | critical path, last run |")
print("|---|---|---:|---|---|")
worst = 0.0
for b, es in rows.items():
    eff = [e["efficiency"] for e in es]
    worst = max(worst, max(eff))
    bounds = [e["bound_per_sec"] for e in es]
    terms = " + ".join((f'{t["times"]} x ' if t["times"] > 1 else "") + f'{t["what"]} {t["us"]:.0f}' for t in es[-1]["critical_path"])
    print(f'| {b} | {" ".join(f"{x:.2f}" for x in eff)} | {max(eff):.2f} | {min(bounds):.0f}-{max(bounds):.0f} | {terms} |')
print(f"\n{len(runs)} runs; highest efficiency {worst:.2f}: " + ("every lock within its bound" if worst <= 1.0 else "A LOCK BEAT ITS BOUND"))
sys.exit(0 if worst <= 1.0 else 1)
PY
