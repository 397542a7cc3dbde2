#!/bin/sh
# ZK_ID: this member's id (1..3). ZK_SERVERS: "1=zk1 2=zk2 3=zk3".
set -eu
data=/var/lib/zookeeper/data
mkdir -p "$data"
echo "$ZK_ID" > "$data/myid"
cfg=/etc/zookeeper/dlbench.cfg
cat > "$cfg" <<CFG
tickTime=500
initLimit=20
syncLimit=10
dataDir=$data
clientPort=2181
maxClientCnxns=0
minSessionTimeout=1000
maxSessionTimeout=120000
admin.enableServer=false
4lw.commands.whitelist=srvr,ruok,mntr
standaloneEnabled=false
reconfigEnabled=false
quorumListenOnAllIPs=true
CFG
for s in $ZK_SERVERS; do
    echo "server.${s%%=*}=${s#*=}:2888:3888" >> "$cfg"
done
exec java -Xmx256m -XX:+UseSerialGC -XX:-UsePerfData -Dzookeeper.admin.enableServer=false \
    -cp /usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar \
    org.apache.zookeeper.server.quorum.QuorumPeerMain "$cfg"
