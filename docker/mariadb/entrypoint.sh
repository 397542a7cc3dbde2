#!/bin/sh
# Initialise the data directory on first start: the `dlbench` user (no password, from any
# address of the compose network and the published port, which compose binds to 127.0.0.1
# only) and its `dlbench` database, as the local target creates them: a benchmark
# database, not a production one.
set -eu
data=/var/lib/mysql-dlbench
# The server's socket directory, which the package creates only under systemd.
mkdir -p /run/mysqld
if [ ! -d "$data/mysql" ]; then
    mariadb-install-db --no-defaults --datadir="$data" --user=root --skip-test-db >/dev/null
    printf "FLUSH PRIVILEGES;\nCREATE USER 'dlbench'@'%%';\nGRANT ALL ON *.* TO 'dlbench'@'%%';\nCREATE DATABASE dlbench;\n" \
        | mariadbd --no-defaults --bootstrap --datadir="$data" --user=root
fi
exec mariadbd --no-defaults --datadir="$data" --user=root --bind-address=0.0.0.0 --port=3306 \
    --skip-name-resolve --max-connections=300
