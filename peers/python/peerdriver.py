"""The workload every Python peer runs, the same as dlbench's closed loop: N clients, each an
OS process with its own connection (as N application processes; threads would share one
interpreter lock and measure the GIL), each picking a key uniformly from `--keys` keys
(1 = hot key), acquire then release at once (hold 0, think 0), for `--warmup` + `--seconds`.
Counts the acquisitions that completed inside the measured window and the acquire latency of
the operations that started in it; prints one JSON line.

A peer module calls `main(name, make_client)`; `make_client(args, index)` runs in the child
process and returns `(acquire(key), release())` bound to that process's own connection.
"""

import argparse
import json
import multiprocessing as mp
import random
import sys
import time
import traceback


def parse(extra=None):
    p = argparse.ArgumentParser()
    p.add_argument("--endpoints", required=True, help="host:port[,host:port...]")
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--keys", type=int, default=1)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--prefix", default="peer")
    p.add_argument("--seed", type=int, default=1)
    if extra:
        extra(p)
    return p.parse_args()


def endpoints(args):
    out = []
    for e in args.endpoints.split(","):
        host, port = e.rsplit(":", 1)
        out.append((host, int(port)))
    return out


def _child(make_client, args, index, start, ready, results):
    try:
        acquire, release = make_client(args, index)
        rng = random.Random(args.seed * 1_000_003 + index)
        keys = [f"{args.prefix}-{k}" for k in range(args.keys)]
        ready.put(index)
        while start.value == 0.0:
            time.sleep(0.001)
        begin = start.value + args.warmup
        end = begin + args.seconds
        count, errors, lat = 0, 0, []
        while True:
            t0 = time.monotonic()
            if t0 >= end:
                break
            key = keys[rng.randrange(len(keys))]
            try:
                acquire(key)
            except Exception:
                errors += 1
                continue
            t1 = time.monotonic()
            release()
            if begin <= t1 <= end:
                count += 1
                if t0 >= begin:
                    lat.append((t1 - t0) * 1e6)
        results.put((index, count, errors, lat, None))
    except Exception:
        ready.put(index)
        results.put((index, 0, 0, [], traceback.format_exc()))


def pct(sorted_values, q):
    if not sorted_values:
        return None
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def main(name, make_client, args):
    ctx = mp.get_context("fork")
    start = ctx.Value("d", 0.0)
    ready, results = ctx.Queue(), ctx.Queue()
    procs = [ctx.Process(target=_child, args=(make_client, args, i, start, ready, results), daemon=True) for i in range(args.clients)]
    for p in procs:
        p.start()
    # Everyone connected before the clock starts, as dlbench's clients are.
    for _ in procs:
        ready.get(timeout=60)
    start.value = time.monotonic()
    got = [results.get(timeout=args.warmup + args.seconds + 60) for _ in procs]
    for p in procs:
        p.join(timeout=10)
    failed = [g[4] for g in got if g[4]]
    if failed:
        print(failed[0], file=sys.stderr)
        sys.exit(1)
    lat = sorted(x for g in got for x in g[3])
    acquisitions = sum(g[1] for g in got)
    print(json.dumps({
        "client": name,
        "clients": args.clients,
        "keys": args.keys,
        "acquisitions": acquisitions,
        "seconds": args.seconds,
        "per_sec": acquisitions / args.seconds,
        "errors": sum(g[2] for g in got),
        "p50_us": pct(lat, 0.5),
        "p99_us": pct(lat, 0.99),
    }))
