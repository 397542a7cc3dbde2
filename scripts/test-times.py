#!/usr/bin/env python3
"""Where the test command's time goes: every test binary of `cargo test --release --workspace`
run in turn, as cargo runs them, with libtest's own per-test timing; prints the slowest tests
and binaries.

    python3 scripts/test-times.py                 build, run everything, print the slowest 20
    python3 scripts/test-times.py --top 40        more rows
    python3 scripts/test-times.py --json FILE     also write every test's time to FILE
    python3 scripts/test-times.py -- FILTER...    pass a filter to every test binary

It builds with `cargo test --no-run` (the README's profile and features, so nothing is rebuilt
afterwards), then runs each binary from its package's directory as cargo does, with libtest's
JSON output and --report-time. Those two are unstable libtest flags: RUSTC_BOOTSTRAP=1 is set
for the test binaries only, never for cargo, because cargo fingerprints it and would rebuild
everything. Doc tests run last through cargo (`cargo test --doc`), timed as one row.
Exit status: 1 when a test failed, else 0.
"""

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build():
    """The test executables, in cargo's order: (name, path, package directory)."""
    out = subprocess.run(
        ["cargo", "test", "--release", "--workspace", "--no-run", "--message-format=json-render-diagnostics"],
        cwd=ROOT, stdout=subprocess.PIPE, check=True, text=True,
    ).stdout
    exes, seen = [], set()
    for line in out.splitlines():
        try:
            m = json.loads(line)
        except ValueError:
            continue
        if m.get("reason") != "compiler-artifact" or not m.get("executable") or not m["profile"].get("test"):
            continue
        if m["executable"] in seen:
            continue
        seen.add(m["executable"])
        t = m["target"]
        kind = t["kind"][0]
        pkg_dir = os.path.dirname(m["manifest_path"])
        pkg = os.path.relpath(pkg_dir, ROOT)
        pkg = "dlbench" if pkg == "." else pkg
        label = f"{pkg} (unit)" if kind == "lib" else f"{pkg} {kind} {t['name']}"
        exes.append((label, m["executable"], pkg_dir))
    return exes


def run_binary(label, exe, cwd, extra):
    env = dict(os.environ, RUSTC_BOOTSTRAP="1")
    started = time.monotonic()
    p = subprocess.Popen(
        [exe, "-Z", "unstable-options", "--format", "json", "--report-time", *extra],
        cwd=cwd, env=env, stdout=subprocess.PIPE, text=True,
    )
    tests, failed = [], []
    for line in p.stdout:
        try:
            ev = json.loads(line)
        except ValueError:
            ev = None
        if not isinstance(ev, dict):
            # A child process the test started writes to the same stdout: pass it on.
            sys.stderr.write(line)
            continue
        if ev.get("type") == "test" and ev.get("event") in ("ok", "failed"):
            tests.append((float(ev.get("exec_time", 0.0)), f"{label} {ev['name']}"))
            if ev["event"] == "failed":
                failed.append(ev["name"])
                sys.stderr.write(ev.get("stdout", "")[-4000:])
    p.wait()
    wall = time.monotonic() - started
    status = "ok" if p.returncode == 0 else f"FAILED ({', '.join(failed) or f'exit {p.returncode}'})"
    print(f"{wall:8.1f} s  {len(tests):4} tests  {label}  {status}", file=sys.stderr, flush=True)
    return wall, tests, p.returncode == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=20, help="rows to print (default 20)")
    ap.add_argument("--json", help="write every test's and binary's time to this file")
    ap.add_argument("filter", nargs="*", help="passed to every test binary (after --)")
    a = ap.parse_args()

    t0 = time.monotonic()
    exes = build()
    built = time.monotonic() - t0
    print(f"build: {built:.1f} s, {len(exes)} test binaries", file=sys.stderr, flush=True)
    binaries, tests, ok = [], [], True
    for label, exe, cwd in exes:
        wall, ts, good = run_binary(label, exe, cwd, a.filter)
        binaries.append((wall, label, len(ts)))
        tests.extend(ts)
        ok &= good
    started = time.monotonic()
    doc = subprocess.run(["cargo", "test", "--release", "--workspace", "--doc", "--quiet", *(["--", *a.filter] if a.filter else [])],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if doc.returncode != 0:
        sys.stderr.write(doc.stdout)
    binaries.append((time.monotonic() - started, "doc tests (cargo test --doc)", 0))
    ok &= doc.returncode == 0
    total = time.monotonic() - t0

    print(f"\nslowest {a.top} tests (libtest's own time; tests in one binary run in parallel):")
    for secs, name in sorted(tests, reverse=True)[: a.top]:
        print(f"{secs:8.1f} s  {name}")
    print(f"\nslowest {a.top} binaries (wall clock, start to exit):")
    for secs, label, n in sorted(binaries, reverse=True)[: a.top]:
        print(f"{secs:8.1f} s  {label} ({n} tests)")
    run = sum(b[0] for b in binaries)
    print(f"\n{len(tests)} tests in {len(binaries)} binaries; build {built:.0f} s, run {run:.0f} s, total {total:.0f} s; {'all passed' if ok else 'SOME FAILED'}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"build_s": built, "run_s": run, "total_s": total, "ok": ok,
                       "binaries": [{"name": l, "secs": s, "tests": n} for s, l, n in binaries],
                       "tests": [{"name": n, "secs": s} for s, n in tests]}, f, indent=1)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
