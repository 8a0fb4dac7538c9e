#!/usr/bin/env bash
# Starts a real Glance for the tests (the PyPI glance package on the test MariaDB, images
# in a directory), on loopback only, behind the Keystone of scripts/start-keystone.sh (which
# must be answering: run that first) and on the MariaDB of scripts/start-mariadb.sh
# (likewise; not SQLite, scripts/lib/mariadb.sh says why). FPGA bitstreams are Glance images; accel's agent
# downloads them to program an FPGA.
#
#   scripts/start-glance.sh          # prints the URL the tests use on its last line
#
# Glance lives in .venv-openstack with Keystone and Placement (scripts/openstack-venv.sh).
# Its database is `glance` on the test MariaDB (user glance, password verso-glance).
# The state (glance-api.conf, its paste file, the images, logs, gunicorn's
# pid) is in $VERSO_GLANCE_DIR (default /tmp/verso-glance); gunicorn serves the image
# API v2 on 127.0.0.1:$VERSO_GLANCE_PORT (default 55002) with keystonemiddleware as the
# user glance (password verso-glance, admin in project service). The image service's
# public, internal and admin endpoints in Keystone's catalog (RegionOne) are set to that
# URL. Idempotent, like scripts/start-placement.sh.
# Stop it: kill "$(cat /tmp/verso-glance/gunicorn.pid)".
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
# shellcheck source=lib/gunicorn.sh
source "$root/scripts/lib/gunicorn.sh"
# shellcheck source=lib/mariadb.sh
source "$root/scripts/lib/mariadb.sh"

dir="${VERSO_GLANCE_DIR:-/tmp/verso-glance}"
port="${VERSO_GLANCE_PORT:-55002}"
keystone_port="${VERSO_KEYSTONE_PORT:-55000}"
wait_s="${VERSO_GLANCE_WAIT_SECONDS:-60}"
workers="${VERSO_GLANCE_WORKERS:-1}"
venv="${VERSO_OPENSTACK_VENV:-$root/.venv-openstack}"
keystone="http://127.0.0.1:$keystone_port"
url="http://127.0.0.1:$port"
database="$(mariadb_service_database glance glance verso-glance)"

name=glance
gunicorn_behind_keystone
gunicorn_state_dir
mkdir -p "$dir/images" "$dir/staging" "$dir/tasks"
# The paste pipelines as the package ships them (keystone flavor: authtoken, context).
gunicorn_write_changed "$dir/glance-api-paste.ini" <"$venv/etc/glance/glance-api-paste.ini"
conf="$dir/glance-api.conf"
gunicorn_write_changed "$conf" <<EOT
[DEFAULT]
log_file = $dir/glance-api.log
enabled_backends = fs:file
[glance_store]
default_backend = fs
[fs]
filesystem_store_datadir = $dir/images
[os_glance_staging_store]
filesystem_store_datadir = $dir/staging
[os_glance_tasks_store]
filesystem_store_datadir = $dir/tasks
[database]
connection = $database
[paste_deploy]
flavor = keystone
config_file = $dir/glance-api-paste.ini
[keystone_authtoken]
www_authenticate_uri = $keystone/v3
auth_url = $keystone/v3
auth_type = password
username = glance
password = verso-glance
project_name = service
user_domain_name = Default
project_domain_name = Default
region_name = RegionOne
EOT

health="$url/"

# Run before gunicorn starts, when this script has to start it.
setup() {
    # The schema, once per state dir and configuration, and again on a MariaDB made
    # afresh.
    stamp="$dir/.synced"
    want="$(sha256sum "$conf" | cut -d' ' -f1)"
    if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || ! mariadb_has_table glance images; then
        if ! "$venv/bin/glance-manage" --config-file "$conf" db_sync \
            >>"$dir/glance-manage.log" 2>&1; then
            echo "glance: db_sync failed; the end of $dir/glance-manage.log:" >&2
            tail -n 30 "$dir/glance-manage.log" >&2
            exit 1
        fi
        echo "$want" >"$stamp"
    fi
}

gunicorn_serve setup "glance.wsgi.api:application" "OS_GLANCE_CONFIG_DIR=$dir"

"$py" "$helper" image-endpoint "$keystone/v3" "$url"
echo "$url"
