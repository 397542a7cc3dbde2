#!/bin/bash
# Hand check of the power-loss layer with a real server (issue 36): Redis with its AOF on a
# faultfs mount; a stream of acknowledged SETs for 1.5 s, then SIGKILL redis-server and cut the
# power (SIGUSR1 to the layer) at once; remount, restart, count the stream keys that survived.
# Under appendfsync everysec the tail written since the last second's fsync is lost; under
# always nothing is. LAYER_SIGNAL=TERM stops the layer in order instead (a process kill: the
# page cache survives), the control where everysec loses nothing.
# Run as root from the repository root after `cargo build --release -p dlbench-faultfs`:
#   bash faultfs/scripts/redis-power-loss.sh everysec|always PORT
set -u
POLICY=$1; PORT=$2
BIN=${FAULTFS_BIN:-target/release/dlbench-faultfs}
ROOT=${TMPDIR:-/tmp}/faultfs-redis/$POLICY; B=$ROOT/backing; M=$ROOT/mnt
rm -rf $ROOT; mkdir -p $B $M
$BIN $B $M 2>$ROOT/faultfs1.log & FPID=$!
for i in $(seq 50); do grep -q " $M .*dlbench-faultfs" /proc/self/mountinfo && break; sleep 0.1; done
redis-server --port $PORT --bind 127.0.0.1 --dir $M --appendonly yes --appendfsync $POLICY --save "" --daemonize no >$ROOT/redis1.log 2>&1 & RPID=$!
for i in $(seq 50); do redis-cli -p $PORT ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p $PORT set early "written 2 s before the power loss" >/dev/null
sleep 2.2
# a stream of acknowledged writes for 1.5 s (each SET answered OK before the next), then the power loss
N=0; END=$(( $(date +%s%N) + 1500000000 ))
while [ $(date +%s%N) -lt $END ]; do N=$((N+1)); redis-cli -p $PORT set k:$N $N >/dev/null; done
echo "before: acknowledged $N stream keys + early; dbsize=$(redis-cli -p $PORT dbsize)"
# the power loss: SIGKILL the server, then SIGUSR1 the layer (within ~10 ms of the write)
kill -KILL $RPID; wait $RPID 2>/dev/null
kill -${LAYER_SIGNAL:-USR1} $FPID; wait $FPID
cat $ROOT/faultfs1.log | tail -1
grep -c dlbench-faultfs /proc/self/mountinfo | sed 's/^/mounts left: /'
# the inverse: remount, restart
$BIN $B $M 2>$ROOT/faultfs2.log & FPID=$!
for i in $(seq 50); do grep -q " $M .*dlbench-faultfs" /proc/self/mountinfo && break; sleep 0.1; done
redis-server --port $PORT --bind 127.0.0.1 --dir $M --appendonly yes --appendfsync $POLICY --save "" --daemonize no >$ROOT/redis2.log 2>&1 & RPID=$!
for i in $(seq 100); do redis-cli -p $PORT ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done
KEPT=0; for i in $(seq $N); do [ "$(redis-cli -p $PORT exists k:$i)" = 1 ] && KEPT=$i; done
echo "after ($POLICY): early=[$(redis-cli -p $PORT get early)] dbsize=$(redis-cli -p $PORT dbsize); last stream key kept k:$KEPT of k:$N acknowledged; lost $((N-KEPT))"
kill -TERM $RPID; wait $RPID 2>/dev/null
kill -TERM $FPID; wait $FPID
tail -1 $ROOT/faultfs2.log
grep -i "aof\|error\|truncat" $ROOT/redis2.log | tail -5
