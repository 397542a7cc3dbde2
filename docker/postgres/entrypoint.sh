#!/bin/sh
# Initialise the cluster on first start; accept connections from the compose network and
# from the published port, which compose binds to 127.0.0.1 only. Trust auth, as the local
# target: a benchmark database, not a production one.
set -eu
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
data=/var/lib/postgresql/dlbench
if [ ! -s "$data/PG_VERSION" ]; then
    mkdir -p "$data" && chown postgres:postgres "$data"
    setpriv --reuid=postgres --regid=postgres --init-groups "$bin/initdb" -D "$data" -U postgres --auth=trust -E UTF8 --locale=C >/dev/null
    echo "host all all 0.0.0.0/0 trust" >> "$data/pg_hba.conf"
fi
exec setpriv --reuid=postgres --regid=postgres --init-groups "$bin/postgres" -D "$data" -c listen_addresses='*' -c max_connections=300
