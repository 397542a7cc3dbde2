#!/bin/sh
# Make results/baseline/: the README's speed workloads (--preset speed) with a fixed seed, on this machine kind
# (2 cores, Debian bookworm). Keeps what `dlbench compare` and a reader need (summary,
# checks, plots, report), not the history (tens of MB).
set -eu
cd "$(dirname "$0")/.."
runs=target/baseline-runs
cargo run --release -- run --preset speed --seed 1 --out "$runs"
rm -rf results/baseline
mkdir -p results/baseline
for f in summary.json summary.md plan.json checks.json resources.jsonl; do
    cp "$runs/latest/$f" results/baseline/
done
cp -r "$runs/latest/plots" "$runs/latest/hdr" results/baseline/
cargo run --release -- report results/baseline
