#!/usr/bin/env bash
# Starts a throwaway MariaDB server for the tests, on loopback only, and waits for it:
# the database a real Cyborg 17 deployment runs on, which `accel db import-cyborg`
# takes over (apps/accel/accel/tests/cyborg_import.rs).
#
#   scripts/start-mariadb.sh        # prints the URL the tests use
#
# The server's data lives in $VERSO_MARIADB_DIR (default /tmp/verso-mariadb), it listens
# on 127.0.0.1:$VERSO_MARIADB_PORT (default 55306, away from a system server on 3306)
# and on the socket $VERSO_MARIADB_DIR/mysqld.sock, and has a user `verso` (password
# `verso`) that may create and drop the databases named `cyborg_test_*` and
# `accel_test_*` (each test makes its own: a Cyborg 17 database to import, or accel's own
# database on MySQL), and `accel_fleet_*` (`accel bench fleet --database mysql://...`). Idempotent: a running server is left running (its users and grants
# brought up to date). Used by scripts/test.sh;
# needs Debian's mariadb-server package (scripts/test.sh installs it).
set -euo pipefail

dir="${VERSO_MARIADB_DIR:-/tmp/verso-mariadb}"
port="${VERSO_MARIADB_PORT:-55306}"
wait_s="${VERSO_MARIADB_WAIT_SECONDS:-60}"
sock="$dir/mysqld.sock"
url="mysql://verso:verso@127.0.0.1:$port/"

for tool in mariadbd mariadb-install-db mariadb-admin mariadb; do
    if ! command -v "$tool" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$tool" ]; then
        echo "mariadb: $tool not found (apt-get install -y mariadb-server)" >&2
        exit 1
    fi
done
server="$(command -v mariadbd || echo /usr/sbin/mariadbd)"

admin() { mariadb --socket="$sock" -uroot "$@"; }
ready() { mariadb-admin --socket="$sock" -uroot status >/dev/null 2>&1; }

# The tests' user and what it may touch; run on every start, so a server started by an
# older version of this script gets what the tests need now.
grant() {
    admin <<'SQL'
CREATE USER IF NOT EXISTS 'verso'@'127.0.0.1' IDENTIFIED BY 'verso';
CREATE USER IF NOT EXISTS 'verso'@'localhost' IDENTIFIED BY 'verso';
GRANT ALL PRIVILEGES ON `cyborg\_test\_%`.* TO 'verso'@'127.0.0.1';
GRANT ALL PRIVILEGES ON `cyborg\_test\_%`.* TO 'verso'@'localhost';
GRANT ALL PRIVILEGES ON `accel\_test\_%`.* TO 'verso'@'127.0.0.1';
GRANT ALL PRIVILEGES ON `accel\_test\_%`.* TO 'verso'@'localhost';
GRANT ALL PRIVILEGES ON `accel\_fleet\_%`.* TO 'verso'@'127.0.0.1';
GRANT ALL PRIVILEGES ON `accel\_fleet\_%`.* TO 'verso'@'localhost';
FLUSH PRIVILEGES;
SQL
}

if ready; then
    grant
    echo "mariadb: already running ($url)"
    exit 0
fi

# The server runs as `mysql` when started by root (it refuses root), else as the caller.
user_args=()
if [ "$(id -u)" = 0 ]; then
    user_args=(--user=mysql)
fi
if [ ! -d "$dir/data/mysql" ]; then
    rm -rf "$dir"
    mkdir -p "$dir/data"
    [ "$(id -u)" = 0 ] && chown -R mysql:mysql "$dir"
    mariadb-install-db "${user_args[@]}" --datadir="$dir/data" --auth-root-authentication-method=socket \
        --skip-test-db >"$dir/install.log" 2>&1 || {
        echo "mariadb: mariadb-install-db failed:" >&2
        cat "$dir/install.log" >&2
        exit 1
    }
fi
[ "$(id -u)" = 0 ] && chown -R mysql:mysql "$dir"

# setsid: the server outlives this script and the shell that ran it.
setsid "$server" --no-defaults "${user_args[@]}" --datadir="$dir/data" --socket="$sock" \
    --pid-file="$dir/mysqld.pid" --bind-address=127.0.0.1 --port="$port" \
    --skip-name-resolve --log-error="$dir/error.log" \
    --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci \
    --innodb-buffer-pool-size=64M </dev/null >/dev/null 2>&1 &

deadline=$((SECONDS + wait_s))
until ready; do
    if [ "$SECONDS" -ge "$deadline" ]; then
        echo "mariadb: not ready within ${wait_s}s; its log:" >&2
        tail -n 30 "$dir/error.log" >&2 || true
        exit 1
    fi
    sleep 0.5
done

grant
echo "mariadb: ready ($url)"
