#!/usr/bin/env bash
# The fault campaign (issue 28), outside CI:
#
#   scripts/chaos.sh                        # 30 minutes, a fault every 15 s
#   scripts/chaos.sh --duration 300         # extra arguments go to `accel chaos`
#
# Starts RabbitMQ and the test PostgreSQL cluster as scripts/test.sh does (run that once
# on a fresh machine: it installs them), builds accel in release mode and runs
# `accel chaos`: separate conductors, agents and APIs behind TCP proxies, clients writing
# without pause, kill -9 / SIGTERM of every kind of component, cut or frozen broker and
# database connections and database restarts on a schedule. It prints the counts per
# fault and exits non-zero on any violation (a broken database invariant, a 500, a 503
# whose write happened anyway, a component that exited on its own); the logs of a failed
# run are kept.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v rabbitmq-server >/dev/null 2>&1 && [ ! -x /usr/sbin/rabbitmq-server ]; then
    echo "RabbitMQ is not installed: run scripts/test.sh once (it installs and starts it)" >&2
    exit 2
fi
if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then
    echo "PostgreSQL is not installed: run scripts/test.sh once (it installs and starts it)" >&2
    exit 2
fi
crates/verso-rpc/interop/start-rabbitmq.sh
scripts/start-postgres.sh
# A vhost of its own: accel's queue names are fixed, so conductors of another deployment
# on the same vhost (a test run) would take the campaign's calls.
rabbitmqctl -n "${RABBITMQ_NODENAME:-rabbit@localhost}" add_vhost verso-chaos >/dev/null 2>&1 || true
rabbitmqctl -n "${RABBITMQ_NODENAME:-rabbit@localhost}" set_permissions -p verso-chaos guest '.*' '.*' '.*' >/dev/null
export VERSO_TEST_RABBIT_URL="${VERSO_CHAOS_RABBIT_URL:-rabbit://guest:guest@127.0.0.1:5672/verso-chaos}"
export VERSO_TEST_POSTGRES_URL="${VERSO_TEST_POSTGRES_URL:-postgres://verso:verso@127.0.0.1:${VERSO_PG_PORT:-55432}/verso}"
# The campaign owns the test cluster while it runs: a database restart is one of its faults.
pg_ctl="$(ls -d /usr/lib/postgresql/*/bin | tail -n 1)/pg_ctl"
pgdir="${VERSO_PG_DIR:-/tmp/verso-postgres}"
restart="$pg_ctl -D $pgdir -l $pgdir/server.log -w -t 60 restart -m fast"
[ "$(id -u)" = 0 ] && restart="runuser -u postgres -- $restart"
cargo build --release -p accel
exec target/release/accel chaos --database-restart-command "$restart" "$@"
