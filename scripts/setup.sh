#!/bin/sh
# Install what dlbench and its tests need on Debian (run as root): the lock servers, the
# official clients used by the interop tests, protoc for etcd-client's build, and a C
# compiler for the clock shim the clock-jump scenario preloads into Redis, and chromium,
# in which the tests render the HTML report, and openssl, which makes the TLS tests' certificates,
# and PgBouncer, through which scenario U6 takes advisory locks, and fuse3 (fusermount3) for the
# power-loss layer (faultfs/; it mounts with the mount syscall as root, fusermount3 otherwise).
# Idempotent: does nothing when everything is already installed.
#
#   sh scripts/setup.sh            the servers and tools dlbench and its tests need
#   sh scripts/setup.sh --peers    also the official clients for `dlbench calibrate --peers`
#                                  (Go, a JDK with Curator, a Python venv; see setup-peers.sh)
set -eu
peers=no
for arg in "$@"; do
    case "$arg" in
        --peers) peers=yes ;;
        *) echo "setup: unknown option $arg (use --peers)" >&2; exit 2 ;;
    esac
done
PACKAGES="etcd-server etcd-client zookeeper redis-server redis-tools postgresql mariadb-server mariadb-client nats-server \
protobuf-compiler libprotobuf-dev gcc chromium openssl pgbouncer fuse3"
missing=""
for p in $PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "setup: installing$missing" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # The packages' own services are not used: dlbench starts its servers on other ports.
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
command -v cargo >/dev/null || { echo "setup: cargo not found; install the Rust toolchain (rustup)" >&2; exit 1; }
if [ "$peers" = yes ]; then
    sh "$(dirname "$0")/setup-peers.sh"
fi
