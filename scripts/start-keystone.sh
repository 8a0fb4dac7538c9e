#!/usr/bin/env bash
# Starts a real Keystone for the tests (the PyPI keystone package on the test MariaDB of
# scripts/start-mariadb.sh, which must be running: not SQLite, scripts/lib/mariadb.sh says
# why), on loopback only, bootstraps it and creates the users the tests log in as.
#
#   scripts/start-keystone.sh        # prints the v3 URL the tests use on its last line
#
# Keystone and gunicorn live in .venv-openstack (requirements-keystone.txt; made or
# updated by scripts/openstack-venv.sh). Its database is `keystone` on the test MariaDB
# (user keystone, password verso-keystone). The state (keystone.conf, fernet
# and credential keys, logs, gunicorn's pid) is in $VERSO_KEYSTONE_DIR (default
# /tmp/verso-keystone); the API is served by gunicorn on 127.0.0.1:$VERSO_KEYSTONE_PORT
# (default 55000). Admin is `admin`/`verso-admin` in project `admin`; region RegionOne.
# Created in domain Default, each user with password verso-<user>:
#   projects service, demo, other; roles member, reader, service (and admin)
#   accel (admin in service: accel API's own user for token validation)
#   nova (service in service: Nova's service token)
#   placement (admin in service: Placement's keystone_authtoken user)
#   glance (admin in service: Glance's keystone_authtoken user)
#   demo-member (member in demo), demo-reader (reader in demo), other-member (member in other)
#   services accelerator (endpoints at $VERSO_ACCEL_API_URL, default
#   http://127.0.0.1:6666/), placement (endpoints: scripts/start-placement.sh) and
#   image (endpoints: scripts/start-glance.sh)
# Idempotent: a running Keystone is left running (restarted only if it runs from another
# venv or configuration), objects that exist are kept, an accelerator endpoint at another
# URL is moved to $VERSO_ACCEL_API_URL. Stop it: kill "$(cat /tmp/verso-keystone/gunicorn.pid)".
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
# shellcheck source=lib/gunicorn.sh
source "$root/scripts/lib/gunicorn.sh"
# shellcheck source=lib/mariadb.sh
source "$root/scripts/lib/mariadb.sh"

dir="${VERSO_KEYSTONE_DIR:-/tmp/verso-keystone}"
port="${VERSO_KEYSTONE_PORT:-55000}"
accel_url="${VERSO_ACCEL_API_URL:-http://127.0.0.1:6666/}"
wait_s="${VERSO_KEYSTONE_WAIT_SECONDS:-60}"
workers="${VERSO_KEYSTONE_WORKERS:-2}"
venv="${VERSO_OPENSTACK_VENV:-$root/.venv-openstack}"
base="http://127.0.0.1:$port"
url="$base/v3"

scripts/openstack-venv.sh
database="$(mariadb_service_database keystone keystone verso-keystone)"
py="$venv/bin/python"
helper="$root/scripts/openstack-services.py"

name=keystone
gunicorn_state_dir
conf="$dir/keystone.conf"
# bcrypt at 4 rounds (Keystone's minimum): the tests log in often, and these passwords
# protect nothing. Passwords at bcrypt's 72 bytes, or Keystone warns on every login.
gunicorn_write_changed "$conf" <<EOF
[DEFAULT]
log_file = $dir/keystone.log
[database]
connection = $database
[token]
provider = fernet
[fernet_tokens]
key_repository = $dir/fernet-keys
[fernet_receipts]
key_repository = $dir/fernet-keys
[credential]
key_repository = $dir/credential-keys
[identity]
password_hash_rounds = 4
max_password_length = 72
EOF

# keystone-manage's output (eventlet's deprecation warning on every start, among
# others) goes to a log of its own, shown when it fails.
manage() {
    if ! "$venv/bin/keystone-manage" --config-file "$conf" "$@" >>"$dir/keystone-manage.log" 2>&1; then
        echo "keystone: keystone-manage $1 failed; the end of $dir/keystone-manage.log:" >&2
        tail -n 30 "$dir/keystone-manage.log" >&2
        exit 1
    fi
}

health="$url"

# Run before gunicorn starts, when this script has to start it.
setup() {
    # The database, keys and bootstrap, once per state dir and URL, and again on a
    # MariaDB made afresh (each keystone-manage takes seconds; all of them keep what
    # exists when run again).
    stamp="$dir/.bootstrapped"
    want="$(sha256sum "$conf" | cut -d' ' -f1) $url"
    if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || ! mariadb_has_table keystone project; then
        owner=(--keystone-user "$(id -un)" --keystone-group "$(id -gn)")
        manage db_sync
        manage fernet_setup "${owner[@]}"
        manage credential_setup "${owner[@]}"
        manage bootstrap --bootstrap-username admin --bootstrap-password verso-admin \
            --bootstrap-project-name admin --bootstrap-role-name admin \
            --bootstrap-service-name keystone --bootstrap-region-id RegionOne \
            --bootstrap-admin-url "$url" --bootstrap-public-url "$url" \
            --bootstrap-internal-url "$url"
        echo "$want" >"$stamp"
    fi
}

gunicorn_serve setup "keystone.wsgi.api:application" "OS_KEYSTONE_CONFIG_FILES=$conf"

"$py" "$helper" keystone-objects "$url" "$accel_url"
echo "$url"
