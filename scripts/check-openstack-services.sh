#!/usr/bin/env bash
# Checks that the Keystone and Placement of scripts/start-keystone.sh and
# scripts/start-placement.sh really work, from .venv-openstack's python:
#   - demo-member gets a token scoped to demo; accel's own token validates it through
#     GET /v3/auth/tokens (X-Subject-Token), with demo-member's roles, and refuses a
#     tampered one; the catalog has the accelerator service;
#   - as placement (admin in service), Placement refuses anonymous callers, is in the
#     catalog at its URL, and keeps a resource provider with an inventory of FPGA 1 and
#     the trait CUSTOM_ACCEL_TEST (read back, found by resources=FPGA:1&required=trait),
#     then deletes it.
# Exits non-zero on any mismatch.
#
#   scripts/check-openstack-services.sh              # both
#   VERSO_CHECK_PLACEMENT=0 scripts/check-openstack-services.sh   # Keystone only
set -euo pipefail
cd "$(dirname "$0")/.."

keystone="${VERSO_TEST_KEYSTONE_URL:-http://127.0.0.1:${VERSO_KEYSTONE_PORT:-55000}/v3}"
placement="${VERSO_TEST_PLACEMENT_URL:-http://127.0.0.1:${VERSO_PLACEMENT_PORT:-55001}}"
py="${VERSO_OPENSTACK_VENV:-$PWD/.venv-openstack}/bin/python"

if [ "${VERSO_CHECK_PLACEMENT:-1}" = 0 ]; then
    "$py" scripts/openstack-services.py check "$keystone"
else
    "$py" scripts/openstack-services.py check "$keystone" "$placement"
fi
echo "check: all good"
