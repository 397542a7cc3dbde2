#!/bin/sh
# The official lock clients `dlbench calibrate --peers` runs beside dlbench, built into
# peers/build/bin/ (one program per client; sources in peers/): Go's clientv3/concurrency
# Mutex and Apache Curator's InterProcessMutex from Debian's packages (built offline), and
# redis-py, pottery and kazoo from PyPI in a virtual environment. Called by
# `sh scripts/setup.sh --peers`; idempotent, rebuilds the programs from the sources each time.
set -eu
cd "$(dirname "$0")/.."
root=$(pwd)
PACKAGES="golang-go golang-etcd-server-dev libcurator-recipes-java default-jdk-headless python3-venv"
missing=""
for p in $PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# A JDK that is not Debian's (javac on the PATH) will do.
if command -v javac >/dev/null; then missing=$(echo "$missing" | sed 's/ default-jdk-headless//'); fi
# A Python that is not Debian's may have venv built in.
if python3 -m venv --help >/dev/null 2>&1; then missing=$(echo "$missing" | sed 's/ python3-venv//'); fi
if [ -n "$missing" ]; then
    echo "setup: installing$missing" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
bin="$root/peers/build/bin"
mkdir -p "$bin"

# Go: GOPATH mode over Debian's Go sources (/usr/share/gocode), no module proxy.
GO111MODULE=off GOPATH=/usr/share/gocode GOPROXY=off GOFLAGS= \
    go build -o "$bin/etcd-mutex" ./peers/go/etcd-mutex

# Java: Curator and ZooKeeper's client from /usr/share/java.
cp=""
for j in curator-recipes curator-framework curator-client zookeeper zookeeper-jute guava failureaccess slf4j-api slf4j-nop; do
    [ -f "/usr/share/java/$j.jar" ] && cp="$cp:/usr/share/java/$j.jar"
done
cp=${cp#:}
mkdir -p "$root/peers/build/java"
javac -d "$root/peers/build/java" -cp "$cp" peers/java/CuratorMutex.java
cat > "$bin/curator-mutex" <<SH
#!/bin/sh
exec java -cp "$root/peers/build/java:$cp" CuratorMutex "\$@"
SH

# Python: pinned versions in a virtual environment (a system Python may refuse pip).
venv="$root/peers/build/venv"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r peers/python/requirements.txt
for peer in redis-py-lock:redis_py_lock pottery-redlock:pottery_redlock kazoo-lock:kazoo_lock; do
    cat > "$bin/${peer%%:*}" <<SH
#!/bin/sh
exec "$venv/bin/python" "$root/peers/python/${peer#*:}.py" "\$@"
SH
done
chmod +x "$bin"/*
echo "setup: peers in $bin: $(ls "$bin" | tr '\n' ' ')" >&2
