#!/bin/sh
# Where an etcd lock cycle's time goes: on one `dlbench up` etcd cluster, 8 clients (each its
# own connection and lease), interleaved rounds of
#   rpc-rust   the RPCs of an uncontended cycle through etcd-client (tonic), own keys
#   rpc-go     the same RPCs through Go's clientv3 (grpc-go)
#   lock-rust  dlbench-etcd's lock, acquire + release, no driver/resource/history, 64 keys
#   mutex-go   Go's concurrency.Mutex on the same 64 keys
#   dlbench    `dlbench run --target external --workload many-keys` (the whole harness)
# then, per path, the median rate and its spread, the process's CPU (user + sys, from
# /usr/bin/time) per cycle over warm-up + window, and the Rust/Go ratios per round.
# LOAD=N adds N busy processes (sha256sum /dev/zero) for the whole series, to see which path
# loses most when the machine is shared.
#
#   sh scripts/etcd-paths.sh [ROUNDS=5] [SECONDS=5]
# needs: cargo build --release --workspace --all-targets; sh scripts/setup.sh --peers
set -eu
rounds=${1:-5}
secs=${2:-5}
bin=${DLBENCH:-./target/release/dlbench}
ex=./target/release/examples/etcd_paths
go=./peers/build/bin/etcd-mutex
for p in "$bin" "$ex" "$go"; do
    [ -x "$p" ] || { echo "etcd-paths: $p not found: run cargo build --release --workspace --all-targets and sh scripts/setup.sh --peers" >&2; exit 2; }
done
out=$(mktemp -d /tmp/dlbench-etcd-paths.XXXXXX)
busy=""
"$bin" up --backends etcd --endpoints "$out/ep.toml" --out "$out/servers" >"$out/up.log" 2>&1 &
up=$!
# TERM, not INT: a background job of a non-interactive shell starts with SIGINT ignored.
trap 'kill $busy 2>/dev/null; kill -TERM $up 2>/dev/null; wait $up 2>/dev/null; rm -rf "$out"' EXIT INT TERM
i=0
while [ ! -s "$out/ep.toml" ]; do
    i=$((i + 1))
    kill -0 $up 2>/dev/null && [ $i -lt 600 ] || { echo "etcd-paths: dlbench up did not start, see:" >&2; cat "$out/up.log" >&2; exit 1; }
    sleep 0.2
done
eps=$(python3 -c 'import sys,tomllib; print(",".join(tomllib.load(open(sys.argv[1],"rb"))["etcd"]["endpoints"]))' "$out/ep.toml")
n=0
while [ "$n" -lt "${LOAD:-0}" ]; do
    sha256sum /dev/zero >/dev/null 2>&1 &
    busy="$busy $!"
    n=$((n + 1))
done
t() { name=$1; shift; /usr/bin/time -f '%U %S' -o "$out/$name.cpu" "$@"; }
r=1
while [ "$r" -le "$rounds" ]; do
    t "rpc-rust-$r" "$ex" --endpoints "$eps" --mode rpc --seconds "$secs" --prefix "r$r" >"$out/rpc-rust-$r.json"
    t "rpc-go-$r" "$go" -endpoints "$eps" -mode rpc -keys 64 -seconds "$secs" -prefix "g$r" >"$out/rpc-go-$r.json"
    t "lock-rust-$r" "$ex" --endpoints "$eps" --mode lock --seconds "$secs" --prefix "l$r" >"$out/lock-rust-$r.json"
    t "mutex-go-$r" "$go" -endpoints "$eps" -mode mutex -keys 64 -seconds "$secs" -prefix "m$r" >"$out/mutex-go-$r.json"
    t "dlbench-$r" "$bin" run --target external --endpoints "$out/ep.toml" --backends etcd --workload many-keys \
        --duration "${secs}s" --warmup 1s --out "$out/run-$r" --no-fail-on-violation >/dev/null 2>"$out/run-$r.log" \
        || { echo "etcd-paths: dlbench run failed, see $out/run-$r.log" >&2; cat "$out/run-$r.log" >&2; exit 1; }
    python3 -c 'import json,sys,glob; s=json.load(open(glob.glob(sys.argv[1]+"/latest/summary.json")[0])); w=s["backends"][0]["workloads"][0]; print(json.dumps({"per_sec": w["ops_per_sec"], "p50_us": w["acquire_latency_us"]["p50"]}))' "$out/run-$r" >"$out/dlbench-$r.json"
    r=$((r + 1))
done
python3 - "$out" "$rounds" "$secs" <<'PY'
import json, sys, statistics as st
out, n, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
paths = ["rpc-rust", "rpc-go", "lock-rust", "mutex-go", "dlbench"]
rate = {p: [json.load(open(f"{out}/{p}-{r}.json"))["per_sec"] for r in range(1, n + 1)] for p in paths}
p50 = {p: [json.load(open(f"{out}/{p}-{r}.json")).get("p50_us") for r in range(1, n + 1)] for p in paths}
def cpu_us(p, r):
    u, s = open(f"{out}/{p}-{r}.cpu").read().split()[-2:]
    return (float(u) + float(s)) * 1e6 / max(1.0, rate[p][r - 1] * (secs + 1))
print(f"| path | cycles/s: median [min - max] over {n} rounds | p50 µs (median) | process CPU µs per cycle (median) |")
print("|---|---:|---:|---:|")
for p in paths:
    v = rate[p]; l = [x for x in p50[p] if x is not None]
    c = st.median(cpu_us(p, r) for r in range(1, n + 1))
    print(f"| {p} | {st.median(v):.0f} [{min(v):.0f} - {max(v):.0f}] | {st.median(l):.0f} |" if l else f"| {p} | {st.median(v):.0f} [{min(v):.0f} - {max(v):.0f}] | - |", end="")
    print(f" {c:.0f} |")
print()
print("| ratio, per round | median [min - max] |")
print("|---|---:|")
for a, b in [("rpc-rust", "rpc-go"), ("lock-rust", "mutex-go"), ("dlbench", "mutex-go"), ("dlbench", "lock-rust")]:
    r = [x / y for x, y in zip(rate[a], rate[b])]
    print(f"| {a} / {b} | {st.median(r):.2f} [{min(r):.2f} - {max(r):.2f}] |")
PY
