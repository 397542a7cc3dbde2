"""pottery's `Redlock` over every Redis node of the Redlock backend, driven by peerdriver.

Documented usage: `Redlock(key=..., masters={Redis(...), ...}, auto_release_time=...)`, then
`acquire()` / `release()`. A blocked `acquire` retries after a random sleep of up to 0.2 s
(pottery's `_RETRY_DELAY`, not a documented parameter, kept as shipped).
"""

from importlib.metadata import version

import redis
from pottery import Redlock

import peerdriver


def make_client(args, index):
    masters = {redis.Redis(host=h, port=p) for h, p in peerdriver.endpoints(args)}
    for m in masters:
        m.ping()
    held = {}

    def acquire(key):
        lock = Redlock(key=key, masters=masters, auto_release_time=10)
        if not lock.acquire(timeout=5):
            raise TimeoutError(key)
        held["lock"] = lock

    def release():
        held.pop("lock").release()

    return acquire, release


if __name__ == "__main__":
    a = peerdriver.parse()
    peerdriver.main(f"pottery {version('pottery')} Redlock", make_client, a)
