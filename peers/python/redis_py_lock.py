"""redis-py's `Lock` (`Redis.lock`), driven by peerdriver's workload.

Documented usage: `r.lock(name, timeout=..., sleep=..., blocking_timeout=...)`, then
`acquire()` / `release()`. The lock polls: a blocked `acquire` sleeps `sleep` seconds between
`SET NX PX` attempts (default 0.1 s). `--sleep` defaults to 0.002 s, dlbench's own retry
interval for Redis, so both sides poll at the same pace; pass 0.1 for the library default.
"""

import redis

import peerdriver


def extra(p):
    p.add_argument("--sleep", type=float, default=0.002)


def make_client(args, index):
    (host, port), = peerdriver.endpoints(args)[:1]
    r = redis.Redis(host=host, port=port)
    r.ping()
    held = {}

    def acquire(key):
        lock = r.lock(key, timeout=10, sleep=args.sleep, blocking_timeout=5)
        if not lock.acquire():
            raise TimeoutError(key)
        held["lock"] = lock

    def release():
        held.pop("lock").release()

    return acquire, release


if __name__ == "__main__":
    a = peerdriver.parse(extra)
    peerdriver.main(f"redis-py {redis.__version__} Lock (sleep {a.sleep}s)", make_client, a)
