#!/usr/bin/env bash
# Installs and starts everything the tests and `accel demo --from cyborg` need, and
# exports the environment they read. Sourced (not run) by scripts/test.sh and
# scripts/demo-from-cyborg.sh:
#
#   source scripts/services.sh
#
# On a fresh Debian machine it installs (apt, as root or through sudo) RabbitMQ,
# PostgreSQL, MariaDB and python3-venv, starts RabbitMQ on loopback only (plain 5672 and
# TLS 5671, throwaway test certificates), a throwaway PostgreSQL cluster on
# 127.0.0.1:55432, a throwaway MariaDB server on 127.0.0.1:55306 (scripts/start-mariadb.sh,
# a real Cyborg 17 database for `accel db import-cyborg`), and a real Keystone
# (127.0.0.1:55000), Placement (127.0.0.1:55001) and Glance (127.0.0.1:55002) from
# .venv-openstack (scripts/start-keystone.sh, scripts/start-placement.sh,
# scripts/start-glance.sh), and creates .venv with the pinned Python peers of
# requirements-test.txt. Each step is skipped when already done.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$PWD"

say() { printf '\n== %s\n' "$*"; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
apt_install() {
    export DEBIAN_FRONTEND=noninteractive
    if [ -z "${apt_updated:-}" ]; then
        as_root apt-get update -qq
        apt_updated=1
    fi
    as_root apt-get install -y -qq "$@" >/dev/null
}

say "RabbitMQ on loopback"
if ! command -v rabbitmq-server >/dev/null 2>&1 && [ ! -x /usr/sbin/rabbitmq-server ]; then
    apt_install rabbitmq-server
fi
if ! command -v openssl >/dev/null 2>&1; then
    apt_install openssl
fi
RABBITMQ_WAIT_SECONDS="${RABBITMQ_WAIT_SECONDS:-120}" crates/verso-rpc/interop/start-rabbitmq.sh

say "PostgreSQL on loopback"
if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then
    apt_install postgresql
fi
scripts/start-postgres.sh
# Each PostgreSQL test makes a database of its own; drop what earlier runs left, or the
# throwaway cluster grows by gigabytes over many runs.
PGPASSWORD=verso psql -h 127.0.0.1 -p "${VERSO_PG_PORT:-55432}" -U verso -d verso -Atc \
    "SELECT datname FROM pg_database WHERE datname LIKE 'accel_test_%' OR datname LIKE 'accel_fleet_%'" |
    while read -r db; do
        PGPASSWORD=verso psql -h 127.0.0.1 -p "${VERSO_PG_PORT:-55432}" -U verso -d verso -qc \
            "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" || true
    done || true

say "MariaDB on loopback (a real Cyborg 17 database for accel db import-cyborg)"
if ! command -v mariadbd >/dev/null 2>&1 && [ ! -x /usr/sbin/mariadbd ]; then
    apt_install mariadb-server
fi
scripts/start-mariadb.sh
# Each MariaDB test makes a database of its own; drop what earlier runs left.
mariadb --socket="${VERSO_MARIADB_DIR:-/tmp/verso-mariadb}/mysqld.sock" -uroot -N -e \
    "SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE 'cyborg\\_test\\_%'" |
    while read -r db; do
        mariadb --socket="${VERSO_MARIADB_DIR:-/tmp/verso-mariadb}/mysqld.sock" -uroot -e "DROP DATABASE IF EXISTS \`$db\`" || true
    done || true

say "Keystone, Placement and Glance on loopback (.venv-openstack from requirements-keystone.txt)"
# Every pin has a manylinux wheel for CPython 3.11 on x86_64, so nothing compiles:
# python3-venv is all that may be missing.
if ! python3 -c "import ensurepip, venv" 2>/dev/null; then
    apt_install python3-venv
fi
scripts/start-keystone.sh
scripts/start-placement.sh
scripts/start-glance.sh

say "Python peers (.venv from requirements-test.txt)"
stamp=.venv/.requirements-test.sha256
want="$(sha256sum requirements-test.txt | cut -d' ' -f1)"
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    if ! python3 -c "import ensurepip, venv" 2>/dev/null; then
        apt_install python3-venv
    fi
    rm -rf .venv
    python3 -m venv .venv
    .venv/bin/pip install -q --disable-pip-version-check -r requirements-test.txt
    echo "$want" >"$stamp"
fi
.venv/bin/python -c "import oslo_messaging, oslo_versionedobjects, cyborg.objects, pymysql"
echo "python: $(.venv/bin/python --version), oslo.versionedobjects, oslo.messaging and openstack-cyborg importable"

export VERSO_TEST_RABBIT_URL="${VERSO_TEST_RABBIT_URL:-rabbit://guest:guest@127.0.0.1:5672/}"
export VERSO_TLS_DIR="${VERSO_TLS_DIR:-/tmp/verso-rabbitmq-tls}"
export VERSO_TEST_RABBIT_TLS_URL="${VERSO_TEST_RABBIT_TLS_URL:-rabbit://guest:guest@localhost:5671/?ssl=1&ssl_ca_file=$VERSO_TLS_DIR/ca.pem}"
export VERSO_TEST_PYTHON="${VERSO_TEST_PYTHON:-$root/.venv/bin/python}"
export VERSO_TEST_POSTGRES_URL="${VERSO_TEST_POSTGRES_URL:-postgres://verso:verso@127.0.0.1:${VERSO_PG_PORT:-55432}/verso}"
export VERSO_TEST_KEYSTONE_URL="${VERSO_TEST_KEYSTONE_URL:-http://127.0.0.1:${VERSO_KEYSTONE_PORT:-55000}/v3}"
export VERSO_TEST_PLACEMENT_URL="${VERSO_TEST_PLACEMENT_URL:-http://127.0.0.1:${VERSO_PLACEMENT_PORT:-55001}}"
# The test MariaDB server (scripts/start-mariadb.sh): Cyborg 17's database in a deployment.
export VERSO_TEST_MYSQL_URL="${VERSO_TEST_MYSQL_URL:-mysql://verso:verso@127.0.0.1:${VERSO_MARIADB_PORT:-55306}/}"
export VERSO_TEST_GLANCE_URL="${VERSO_TEST_GLANCE_URL:-http://127.0.0.1:${VERSO_GLANCE_PORT:-55002}}"
# Where the test Glance keeps image data (its file store): a test changes a stored
# image under Glance to check that an agent refuses bytes Glance did not hash.
export VERSO_TEST_GLANCE_STORE="${VERSO_TEST_GLANCE_STORE:-${VERSO_GLANCE_DIR:-/tmp/verso-glance}/images}"
