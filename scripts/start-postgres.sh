#!/usr/bin/env bash
# Starts a throwaway PostgreSQL cluster for the tests, on loopback only, and waits for it.
#
#   scripts/start-postgres.sh        # prints the URL the tests use
#
# The cluster lives in $VERSO_PG_DIR (default /tmp/verso-postgres), listens on
# 127.0.0.1:$VERSO_PG_PORT (default 55432, away from a system cluster on 5432), and has a
# role `verso` (password `verso`) that owns the database `verso` and may create more
# (each test makes its own). Idempotent: a running cluster is left alone. Used by
# scripts/test.sh; needs Debian's postgresql package (scripts/test.sh installs it).
set -euo pipefail

dir="${VERSO_PG_DIR:-/tmp/verso-postgres}"
port="${VERSO_PG_PORT:-55432}"
wait_s="${VERSO_PG_WAIT_SECONDS:-60}"
url="postgres://verso:verso@127.0.0.1:$port/verso"

bin=""
for candidate in /usr/lib/postgresql/*/bin; do
    [ -x "$candidate/pg_ctl" ] && bin="$candidate"
done
if [ -z "$bin" ]; then
    echo "postgres: no PostgreSQL server found (apt-get install -y postgresql)" >&2
    exit 1
fi

as_postgres() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

ready() { as_postgres "$bin/pg_isready" -q -h 127.0.0.1 -p "$port"; }

if ready; then
    echo "postgres: already listening on 127.0.0.1:$port ($url)"
    exit 0
fi

if [ ! -f "$dir/PG_VERSION" ]; then
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres:postgres "$dir"
    chmod 700 "$dir"
    as_postgres "$bin/initdb" -D "$dir" -U postgres --auth-local=trust --auth-host=scram-sha-256 \
        --encoding=UTF8 --locale=C.UTF-8 >/dev/null
fi

# Tuned for throwaway test data on a small machine: no fsync, little memory.
as_postgres "$bin/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t "$wait_s" start -o \
    "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir \
     -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200 \
     -c shared_buffers=64MB" >/dev/null

for _ in $(seq "$wait_s"); do
    ready && break
    sleep 1
done
ready || { echo "postgres: not ready after $wait_s s (log: $dir/server.log)" >&2; exit 1; }

as_postgres "$bin/psql" -q -h "$dir" -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 <<SQL
DO \$\$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'verso') THEN
    CREATE ROLE verso LOGIN CREATEDB PASSWORD 'verso';
  END IF;
END \$\$;
SELECT 'CREATE DATABASE verso OWNER verso' WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'verso')\gexec
SQL
echo "postgres: listening on 127.0.0.1:$port ($url)"
