#!/usr/bin/env bash
# Starts a real Placement for the tests (the PyPI openstack-placement package on the test
# MariaDB), on loopback only, behind the Keystone of scripts/start-keystone.sh (which must
# be answering: run that first) and on the MariaDB of scripts/start-mariadb.sh (likewise).
# Not SQLite (scripts/lib/mariadb.sh says why).
#
#   scripts/start-placement.sh       # prints the URL the tests use on its last line
#
# Placement lives in .venv-openstack with Keystone (scripts/openstack-venv.sh). Its
# database is `placement` on the test MariaDB (user placement, password verso-placement,
# made here through the server's root socket). The state
# (placement.conf, logs, gunicorn's pid) is in $VERSO_PLACEMENT_DIR
# (default /tmp/verso-placement); gunicorn serves the API on
# 127.0.0.1:$VERSO_PLACEMENT_PORT (default 55001) with `[api] auth_strategy = keystone`:
# tokens are checked by keystonemiddleware as the user placement (password
# verso-placement, admin in project service). The placement service's public, internal
# and admin endpoints in Keystone's catalog (RegionOne) are set to that URL.
# Idempotent: a running Placement is left running (restarted only if it runs from another
# venv or configuration), the schema is synced once per state dir and configuration.
# Stop it: kill "$(cat /tmp/verso-placement/gunicorn.pid)".
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
# shellcheck source=lib/gunicorn.sh
source "$root/scripts/lib/gunicorn.sh"

dir="${VERSO_PLACEMENT_DIR:-/tmp/verso-placement}"
port="${VERSO_PLACEMENT_PORT:-55001}"
keystone_port="${VERSO_KEYSTONE_PORT:-55000}"
wait_s="${VERSO_PLACEMENT_WAIT_SECONDS:-60}"
workers="${VERSO_PLACEMENT_WORKERS:-2}"
venv="${VERSO_OPENSTACK_VENV:-$root/.venv-openstack}"
keystone="http://127.0.0.1:$keystone_port"
url="http://127.0.0.1:$port"

# shellcheck source=lib/mariadb.sh
source "$root/scripts/lib/mariadb.sh"
database="$(mariadb_service_database placement placement verso-placement)"

name=placement
gunicorn_behind_keystone
gunicorn_state_dir
conf="$dir/placement.conf"
gunicorn_write_changed "$conf" <<EOF
[DEFAULT]
log_file = $dir/placement.log
[api]
auth_strategy = keystone
[placement_database]
connection = $database
[keystone_authtoken]
www_authenticate_uri = $keystone/v3
auth_url = $keystone/v3
auth_type = password
username = placement
password = verso-placement
project_name = service
user_domain_name = Default
project_domain_name = Default
region_name = RegionOne
EOF

health="$url/"

# Run before gunicorn starts, when this script has to start it.
setup() {
    # The schema, once per configuration and database (db sync takes seconds; a MariaDB
    # made afresh has no tables, whatever the stamp says).
    stamp="$dir/.synced"
    want="$(sha256sum "$conf" | cut -d' ' -f1)"
    if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || ! mariadb_has_table placement resource_providers; then
        if ! "$venv/bin/placement-manage" --config-file "$conf" db sync \
            >>"$dir/placement-manage.log" 2>&1; then
            echo "placement: db sync failed; the end of $dir/placement-manage.log:" >&2
            tail -n 30 "$dir/placement-manage.log" >&2
            exit 1
        fi
        echo "$want" >"$stamp"
    fi
}

gunicorn_serve setup "placement.wsgi.api:application" "OS_PLACEMENT_CONFIG_DIR=$dir"

"$py" "$helper" placement-endpoint "$keystone/v3" "$url"
echo "$url"
