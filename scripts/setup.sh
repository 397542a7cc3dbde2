#!/bin/sh
# Install what dlbench and its tests need on Debian (run as root): the lock servers, the
# official clients used by the interop tests, protoc for etcd-client's build, and a C
# compiler for the clock shim the clock-jump scenario preloads into Redis, and chromium,
# in which the tests render the HTML report, and openssl, which makes the TLS tests' certificates.
# Idempotent: does nothing when everything is already installed.
set -eu
PACKAGES="etcd-server etcd-client zookeeper redis-server redis-tools postgresql \
protobuf-compiler libprotobuf-dev gcc chromium openssl"
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
