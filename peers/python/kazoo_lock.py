"""kazoo's `Lock` recipe (`KazooClient.Lock`), driven by peerdriver's workload.

Documented usage: one started `KazooClient` (one ZooKeeper session) per process,
`zk.Lock(path, identifier)`, then `acquire(timeout=...)` / `release()`. One Lock object per
key per process, reused across cycles, as an application holding a lock by name would.
"""

import logging
from importlib.metadata import version

from kazoo.client import KazooClient

import peerdriver


def make_client(args, index):
    logging.basicConfig(level=logging.ERROR)
    zk = KazooClient(hosts=args.endpoints, timeout=10)
    zk.start(timeout=30)
    locks = {}
    held = {}

    def acquire(key):
        lock = locks.get(key)
        if lock is None:
            lock = locks[key] = zk.Lock(f"/{args.prefix}/{key}", f"client-{index}")
        if not lock.acquire(timeout=5):
            raise TimeoutError(key)
        held["lock"] = lock

    def release():
        held.pop("lock").release()

    return acquire, release


if __name__ == "__main__":
    a = peerdriver.parse()
    peerdriver.main(f"kazoo {version('kazoo')} Lock", make_client, a)
