#!/usr/bin/env bash
# Starts Debian's rabbitmq-server in the background on loopback only (no systemd on
# these machines) and waits for its ports: plain AMQP on 127.0.0.1:5672 and AMQP over
# TLS on 127.0.0.1:5671. The TLS listener uses the throwaway test CA and certificates of
# make-test-certs.sh (in $VERSO_TLS_DIR, default /tmp/verso-rabbitmq-tls); it asks
# clients for a certificate and checks it against the test CA, but also takes clients
# without one (verify_peer, fail_if_no_peer_cert = false).
#
# Idempotent: does nothing if both ports answer and the certificates did not change. A
# broker that runs without the TLS listener (or with older certificates) is stopped and
# started again with this configuration. Used by .ci/run and by developers before the
# interop tests.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
port="${RABBITMQ_NODE_PORT:-5672}"
tls_port="${RABBITMQ_TLS_PORT:-5671}"
wait_s="${RABBITMQ_WAIT_SECONDS:-120}"
export VERSO_TLS_DIR="${VERSO_TLS_DIR:-/tmp/verso-rabbitmq-tls}"
tls_dir="$VERSO_TLS_DIR"

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
fingerprint() { openssl x509 -noout -fingerprint -sha256 -in "$tls_dir/server.pem" 2>/dev/null || true; }

before="$(fingerprint)"
"$here/make-test-certs.sh"
after="$(fingerprint)"

if port_open "$port" && port_open "$tls_port" && [ "$before" = "$after" ]; then
    echo "rabbitmq: already listening on 127.0.0.1:$port and 127.0.0.1:$tls_port (TLS)"
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
# No scheduler busy-waiting (+sbwt none...): on a 2-core machine shared with the tests
# and the benches, the Erlang VM's spinning schedulers take CPU the clients need
# (RabbitMQ's runtime guide recommends this where cores are shared).
export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1} \
+sbwt none +sbwtdcpu none +sbwtdio none"
log="${RABBITMQ_START_LOG:-/tmp/verso-rabbitmq.log}"

# The TLS listener, in a config file of our own (the broker reads it as the rabbitmq
# user: the directory and the files are readable by it).
conf="$tls_dir/rabbitmq.conf"
cat >"$conf" <<EOF
# Written by crates/verso-rpc/interop/start-rabbitmq.sh: the test broker's TLS listener.
listeners.ssl.default = 127.0.0.1:$tls_port
ssl_options.cacertfile = $tls_dir/ca.pem
ssl_options.certfile = $tls_dir/server.pem
ssl_options.keyfile = $tls_dir/server-key.pem
ssl_options.verify = verify_peer
ssl_options.fail_if_no_peer_cert = false
EOF
chmod 644 "$conf"
export RABBITMQ_CONFIG_FILE="$conf"

if port_open "$port" || port_open "$tls_port"; then
    echo "rabbitmq: the running broker lacks the TLS listener or has older certificates;" \
        "restarting it"
    if ! rabbitmqctl -n "$RABBITMQ_NODENAME" shutdown >/dev/null 2>&1; then
        echo "rabbitmq: could not stop the running broker (node $RABBITMQ_NODENAME) with" \
            "rabbitmqctl shutdown; stop it yourself and run this script again" >&2
        exit 1
    fi
    for _ in $(seq 1 30); do
        if ! port_open "$port" && ! port_open "$tls_port"; then
            break
        fi
        sleep 1
    done
    if port_open "$port" || port_open "$tls_port"; then
        echo "rabbitmq: the old broker still holds port $port or $tls_port after 30 s" >&2
        exit 1
    fi
fi

echo "rabbitmq: starting in the background (log: $log, config: $conf)"
# Descriptors above 2 closed: the broker must not keep a lock its caller holds.
nohup rabbitmq-server >"$log" 2>&1 </dev/null 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- &
pid=$!

for _ in $(seq 1 "$wait_s"); do
    if port_open "$port" && port_open "$tls_port"; then
        echo "rabbitmq: listening on 127.0.0.1:$port and 127.0.0.1:$tls_port (TLS)"
        exit 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
        echo "rabbitmq: the broker exited while starting; last lines of $log:" >&2
        tail -n 40 "$log" >&2 || true
        exit 1
    fi
    sleep 1
done
echo "rabbitmq: ports $port and $tls_port did not both open within ${wait_s}s; last lines" \
    "of $log:" >&2
tail -n 40 "$log" >&2 || true
exit 1
