#!/usr/bin/env bash
# Starts a throwaway PostgreSQL cluster for the tests, on loopback only, and waits for it.
#
#   scripts/start-postgres.sh        # prints the URL the tests use
#
# The cluster lives in $VERSO_PG_DIR (default /tmp/verso-postgres), listens on
# 127.0.0.1:$VERSO_PG_PORT (default 55432, away from a system cluster on 5432), and has a
# role `verso` (password `verso`) that owns the database `verso` and may create more
# (each test makes its own). It takes TLS too (ssl = on) with a throwaway CA and a
# server certificate for localhost and 127.0.0.1 in $VERSO_PG_TLS_DIR (default
# /tmp/verso-postgres-tls; the tests verify against its ca.pem); plain connections keep
# working. Idempotent: a running cluster is left running, and gets TLS turned on by a
# configuration reload if it lacks it. Used by scripts/test.sh; needs Debian's
# postgresql package (scripts/test.sh installs it) and openssl.
set -euo pipefail

dir="${VERSO_PG_DIR:-/tmp/verso-postgres}"
port="${VERSO_PG_PORT:-55432}"
wait_s="${VERSO_PG_WAIT_SECONDS:-60}"
tls="${VERSO_PG_TLS_DIR:-/tmp/verso-postgres-tls}"
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

# The throwaway CA and the server's certificate (made once, kept with the key readable
# by the server only).
if [ ! -f "$tls/server.key" ]; then
    mkdir -p "$tls"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=verso test PostgreSQL CA" \
        -keyout "$tls/ca.key" -out "$tls/ca.pem" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" \
        -keyout "$tls/server.key.new" -out "$tls/server.csr" 2>/dev/null
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$tls/server.ext"
    openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" \
        -CAcreateserial -days 3650 -extfile "$tls/server.ext" -out "$tls/server.pem" 2>/dev/null
    chmod 600 "$tls/server.key.new"
    [ "$(id -u)" = 0 ] && chown postgres:postgres "$tls/server.key.new" "$tls/server.pem"
    mv "$tls/server.key.new" "$tls/server.key"
fi

psql_admin() {
    as_postgres "$bin/psql" -q -h "$dir" -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 "$@"
}

if ready; then
    echo "postgres: already listening on 127.0.0.1:$port"
    started=0
else
    started=1
fi

if [ "$started" = 1 ] && [ ! -f "$dir/PG_VERSION" ]; then
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres:postgres "$dir"
    chmod 700 "$dir"
    as_postgres "$bin/initdb" -D "$dir" -U postgres --auth-local=trust --auth-host=scram-sha-256 \
        --encoding=UTF8 --locale=C.UTF-8 >/dev/null
fi

if [ "$started" = 1 ]; then
    # Tuned for throwaway test data on a small machine: no fsync, little memory.
    # Descriptors above 2 closed: the server must not keep a lock its caller holds.
    as_postgres "$bin/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t "$wait_s" start -o \
        "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir \
         -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200 \
         -c shared_buffers=64MB" >/dev/null 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-
fi

for _ in $(seq "$wait_s"); do
    ready && break
    sleep 1
done
ready || { echo "postgres: not ready after $wait_s s (log: $dir/server.log)" >&2; exit 1; }

# TLS through postgresql.auto.conf and a reload: the same for a new cluster and one that
# was already running without it; connections open meanwhile are not disturbed.
if [ "$(psql_admin -tA -c 'SHOW ssl')" != on ]; then
    psql_admin >/dev/null <<SQL
ALTER SYSTEM SET ssl_cert_file = '$tls/server.pem';
ALTER SYSTEM SET ssl_key_file = '$tls/server.key';
ALTER SYSTEM SET ssl = on;
SELECT pg_reload_conf();
SQL
    for _ in $(seq "$wait_s"); do
        [ "$(psql_admin -tA -c 'SHOW ssl')" = on ] && break
        sleep 1
    done
    [ "$(psql_admin -tA -c 'SHOW ssl')" = on ] ||
        { echo "postgres: ssl did not turn on (log: $dir/server.log)" >&2; exit 1; }
fi

psql_admin <<SQL
DO \$\$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'verso') THEN
    CREATE ROLE verso LOGIN CREATEDB PASSWORD 'verso';
  END IF;
END \$\$;
SELECT 'CREATE DATABASE verso OWNER verso' WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'verso')\gexec
SQL
echo "postgres: listening on 127.0.0.1:$port ($url; TLS: sslmode=verify-full&sslrootcert=$tls/ca.pem)"
