#!/usr/bin/env bash
# The one benchmark command: runs every benchmark that feeds BENCHMARKS.md, then writes
# BENCHMARKS.md and its charts (docs/bench/*.svg) from their result files. Not run by CI.
#
#   scripts/bench.sh                    # everything, full settings
#   scripts/bench.sh --quick            # shorter criterion and RPC runs, smaller fleet
#   scripts/bench.sh codec rpc          # only these (codec, rpc, service, placement, fleet); the
#                                       # report is still made of every result file there
#
# Services: RabbitMQ and PostgreSQL on loopback are reused when they answer, else started
# as scripts/test.sh starts them (crates/verso-rpc/interop/start-rabbitmq.sh,
# scripts/start-postgres.sh); the service bench starts MariaDB, Keystone and Placement the
# same way (scripts/start-mariadb.sh, start-keystone.sh, start-placement.sh: reused when
# running); the Python peers are VERSO_TEST_PYTHON, else the .venv
# scripts/test.sh creates (this script creates it the same way when it is missing).
# Each benchmark writes <bench>.json into VERSO_BENCH_OUT (default target/bench-results;
# results of earlier runs there are kept, so a partial run updates its sections only;
# BENCHMARKS.md is written only when every section has a result file there).
# VERSO_BENCH_LOCK=FILE runs every cargo command under `flock FILE` (a machine shared by
# several builders).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

# The parts, each as name:result file (<file>.json in VERSO_BENCH_OUT), in report order.
parts=(codec:codec rpc:rpc-inflight service:service placement:placement fleet:fleet)
names=("${parts[@]%%:*}")
quick=""
which=()
for arg in "$@"; do
    if [ "$arg" = --quick ]; then
        quick=1
    elif [[ " ${names[*]} " == *" $arg "* ]]; then
        which+=("$arg")
    else
        echo "bench.sh: unknown argument $arg (--quick, ${names[*]})" >&2
        exit 2
    fi
done
[ ${#which[@]} -gt 0 ] || which=("${names[@]}")
wants() { [[ " ${which[*]} " == *" $1 "* ]]; }

say() { printf '\n== %s\n' "$*"; }
cargo_() {
    if [ -n "${VERSO_BENCH_LOCK:-}" ]; then flock "$VERSO_BENCH_LOCK" cargo "$@"; else cargo "$@"; fi
}
answers() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

say "services"
if answers 5672; then
    echo "rabbitmq: answering on 127.0.0.1:5672, reused"
else
    crates/verso-rpc/interop/start-rabbitmq.sh
fi
pg_port="${VERSO_PG_PORT:-55432}"
if answers "$pg_port"; then
    echo "postgres: answering on 127.0.0.1:$pg_port, reused"
else
    scripts/start-postgres.sh
fi
if [ -z "${VERSO_TEST_PYTHON:-}" ]; then
    if [ ! -x .venv/bin/python ]; then
        python3 -m venv .venv
        .venv/bin/pip install -q --disable-pip-version-check -r requirements-test.txt
    fi
    export VERSO_TEST_PYTHON="$root/.venv/bin/python"
fi
"$VERSO_TEST_PYTHON" -c "import oslo_messaging, oslo_versionedobjects"
export VERSO_TEST_RABBIT_URL="${VERSO_TEST_RABBIT_URL:-rabbit://guest:guest@127.0.0.1:5672/}"
export VERSO_TEST_POSTGRES_URL="${VERSO_TEST_POSTGRES_URL:-postgres://verso:verso@127.0.0.1:$pg_port/verso}"
export VERSO_BENCH_OUT="${VERSO_BENCH_OUT:-$root/target/bench-results}"
mkdir -p "$VERSO_BENCH_OUT"

criterion=()
if [ -n "$quick" ]; then
    criterion=(--warm-up-time 1 --measurement-time 2)
    export VERSO_BENCH_CALLS="${VERSO_BENCH_CALLS:-2000}" VERSO_BENCH_ROUNDS="${VERSO_BENCH_ROUNDS:-3}"
fi

if wants codec; then
    say "codec: verso vs serde_json vs Python OVO"
    cargo_ bench -p verso --bench primitive -- "${criterion[@]}"
fi
if wants rpc; then
    say "RPC calls in flight: verso vs oslo.messaging vs the amqprs floor"
    cargo_ bench -p verso-rpc --bench amqp_inflight
fi
if wants service; then
    say "service operations on SQLite, PostgreSQL and MariaDB"
    # Real Cyborg 17's conductor, the reference of the Cyborg report, asks Placement
    # (through Keystone) for the host's provider on every report.
    scripts/start-mariadb.sh >/dev/null
    scripts/start-keystone.sh
    scripts/start-placement.sh
    export VERSO_TEST_KEYSTONE_URL="${VERSO_TEST_KEYSTONE_URL:-http://127.0.0.1:${VERSO_KEYSTONE_PORT:-55000}/v3}"
    export VERSO_TEST_MYSQL_URL="${VERSO_TEST_MYSQL_URL:-mysql://verso:verso@127.0.0.1:${VERSO_MARIADB_PORT:-55306}/}"
    cargo_ bench -p accel-api --bench throughput -- "${criterion[@]}"
fi
if wants placement; then
    say "the Placement reconciler's read: full against changed hosts"
    if [ -n "$quick" ]; then
        VERSO_BENCH_HOSTS=1000 cargo_ bench -p accel-conductor --bench reconcile
    else
        cargo_ bench -p accel-conductor --bench reconcile
    fi
fi
if wants fleet; then
    say "fleet"
    cargo_ build --release -q -p accel
    # Relative to the workspace (this script runs there), so the command the result file
    # records reads the same on any machine.
    accel="${CARGO_TARGET_DIR:-target}/release/accel"
    # `accel bench fleet` writes fleet.json into VERSO_BENCH_OUT itself.
    if [ -n "$quick" ]; then
        "$accel" bench fleet --agents 100,1000 --conductors 1,3
    else
        "$accel" bench fleet --agents 100,1000,10000 --conductors 1,3
    fi
fi

say "BENCHMARKS.md"
# BENCHMARKS.md is made of every result file in VERSO_BENCH_OUT: a partial run where the
# other sections' files are missing (a fresh checkout, a new VERSO_BENCH_OUT) would write
# a BENCHMARKS.md without them, so it is not written; the results of this run are kept.
missing=()
for part in "${parts[@]}"; do
    [ -f "$VERSO_BENCH_OUT/${part#*:}.json" ] || missing+=("${part%%:*}")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "bench.sh: no results in $VERSO_BENCH_OUT for: ${missing[*]}; BENCHMARKS.md left as it is" >&2
    echo "bench.sh: run scripts/bench.sh ${missing[*]} to complete it (this run's results are kept)" >&2
    exit 1
fi
cargo_ run --release -q -p bench-report -- "$VERSO_BENCH_OUT" --out "$root"
