#!/bin/sh
# Install what dlbench needs on Debian (run as root): the lock servers, protoc for
# etcd-client's build, a C compiler for the clock shim the clock-jump scenario preloads into
# Redis, openssl, PgBouncer (through which scenario U6 takes advisory locks) and fuse3
# (fusermount3) for the power-loss layer (it mounts with the mount syscall as root,
# fusermount3 otherwise). With --peers, also what only the tests need: chromium, in which
# they render the HTML report, and the official lock clients they run beside dlbench.
# Idempotent: does nothing when everything is already installed.
#
#   sh scripts/setup.sh            the servers and tools `dlbench` needs (README command 1)
#   sh scripts/setup.sh --peers    also what the tests need (README command 2): chromium and the
#                                  official clients for `dlbench calibrate --peers` (Go, a JDK
#                                  with Curator, a Python venv; see setup-peers.sh)
set -eu
peers=no
for arg in "$@"; do
    case "$arg" in
        --peers) peers=yes ;;
        *) echo "setup: unknown option $arg (use --peers)" >&2; exit 2 ;;
    esac
done
PACKAGES="etcd-server etcd-client zookeeper redis-server redis-tools postgresql mariadb-server mariadb-client nats-server \
protobuf-compiler libprotobuf-dev gcc openssl pgbouncer fuse3"
# What only the tests need: the page is rendered in a browser there, never by dlbench.
[ "$peers" = yes ] && PACKAGES="$PACKAGES chromium"
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
