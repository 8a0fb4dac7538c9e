#!/usr/bin/env bash
# Starts Debian's rabbitmq-server in the background on loopback only (no systemd on
# these machines) and waits for its AMQP port. Idempotent: does nothing if the port
# already answers. Used by .ci/run and by developers before the interop tests.
set -euo pipefail

port="${RABBITMQ_NODE_PORT:-5672}"
wait_s="${RABBITMQ_WAIT_SECONDS:-120}"

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; }

if port_open; then
    echo "rabbitmq: already listening on 127.0.0.1:$port"
    exit 0
fi

if ! command -v rabbitmq-server >/dev/null 2>&1 && [ ! -x /usr/sbin/rabbitmq-server ]; then
    echo "rabbitmq: rabbitmq-server is not installed (apt-get install -y rabbitmq-server)" >&2
    exit 1
fi

# Loopback only: AMQP listener, Erlang distribution and epmd.
export RABBITMQ_NODE_IP_ADDRESS=127.0.0.1
export RABBITMQ_NODE_PORT="$port"
export ERL_EPMD_ADDRESS=127.0.0.1
export RABBITMQ_NODENAME="${RABBITMQ_NODENAME:-rabbit@localhost}"
export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
log="${RABBITMQ_START_LOG:-/tmp/verso-rabbitmq.log}"

echo "rabbitmq: starting in the background (log: $log)"
nohup rabbitmq-server >"$log" 2>&1 </dev/null &

for _ in $(seq 1 "$wait_s"); do
    if port_open; then
        echo "rabbitmq: listening on 127.0.0.1:$port"
        exit 0
    fi
    sleep 1
done
echo "rabbitmq: port $port did not open within ${wait_s}s; last lines of $log:" >&2
tail -n 40 "$log" >&2 || true
exit 1
