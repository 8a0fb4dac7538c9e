#!/usr/bin/env bash
# `accel demo --from cyborg`: the rolling upgrade of a running OpenStack Cyborg 17
# deployment (the PyPI package's conductor, API and agents) to accel, node by node, on
# this machine. Installs and starts what it needs (scripts/services.sh: the test
# services, of which it uses RabbitMQ, Keystone and Placement, and the .venv with
# openstack-cyborg 17.0.0), builds accel and runs
# the demo; extra arguments go to it.
#
#   scripts/demo-from-cyborg.sh                 # 6 hosts
#   scripts/demo-from-cyborg.sh --agents 5 --json report.json
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/services.sh
source scripts/services.sh

say "accel demo --from cyborg"
# A debug build, the one scripts/test.sh makes: the demo waits on Cyborg, not on accel.
cargo build -q -p accel
target/debug/accel demo --from cyborg \
    --transport-url "$VERSO_TEST_RABBIT_URL" \
    --cyborg-python "$VERSO_TEST_PYTHON" --keystone-url "$VERSO_TEST_KEYSTONE_URL" "$@"
