#!/usr/bin/env bash
# Starts a real Keystone for the tests (the PyPI keystone package on SQLite), on
# loopback only, bootstraps it and creates the users the tests log in as.
#
#   scripts/start-keystone.sh        # prints the v3 URL the tests use on its last line
#
# Keystone and gunicorn live in .venv-openstack (requirements-keystone.txt; made or
# updated by scripts/openstack-venv.sh). The state (keystone.conf, keystone.db, fernet
# and credential keys, logs, gunicorn's pid) is in $VERSO_KEYSTONE_DIR (default
# /tmp/verso-keystone); the API is served by gunicorn on 127.0.0.1:$VERSO_KEYSTONE_PORT
# (default 55000). Admin is `admin`/`verso-admin` in project `admin`; region RegionOne.
# Created in domain Default, each user with password verso-<user>:
#   projects service, demo, other; roles member, reader, service (and admin)
#   accel (admin in service: accel API's own user for token validation)
#   nova (service in service: Nova's service token)
#   placement (admin in service: Placement's keystone_authtoken user)
#   demo-member (member in demo), demo-reader (reader in demo), other-member (member in other)
#   services accelerator (endpoints at $VERSO_ACCEL_API_URL, default
#   http://127.0.0.1:6666/) and placement (endpoints: scripts/start-placement.sh)
# Idempotent: a running Keystone is left running (restarted only if it runs from another
# venv or configuration), objects that exist are kept, an accelerator endpoint at another
# URL is moved to $VERSO_ACCEL_API_URL. Stop it: kill "$(cat /tmp/verso-keystone/gunicorn.pid)".
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

dir="${VERSO_KEYSTONE_DIR:-/tmp/verso-keystone}"
port="${VERSO_KEYSTONE_PORT:-55000}"
accel_url="${VERSO_ACCEL_API_URL:-http://127.0.0.1:6666/}"
wait_s="${VERSO_KEYSTONE_WAIT_SECONDS:-60}"
workers="${VERSO_KEYSTONE_WORKERS:-2}"
venv="${VERSO_OPENSTACK_VENV:-$root/.venv-openstack}"
base="http://127.0.0.1:$port"
url="$base/v3"

scripts/openstack-venv.sh
py="$venv/bin/python"
helper="$root/scripts/openstack-services.py"

mkdir -p "$dir"
dir="$(cd "$dir" && pwd -P)"
conf="$dir/keystone.conf"
# bcrypt at 4 rounds (Keystone's minimum): the tests log in often, and these passwords
# protect nothing. Passwords at bcrypt's 72 bytes, or Keystone warns on every login.
cat >"$conf.new" <<EOF
[DEFAULT]
log_file = $dir/keystone.log
[database]
connection = sqlite:///$dir/keystone.db
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
if cmp -s "$conf.new" "$conf"; then rm "$conf.new"; else mv "$conf.new" "$conf"; fi

# keystone-manage's output (eventlet's deprecation warning on every start, among
# others) goes to a log of its own, shown when it fails.
manage() {
    if ! "$venv/bin/keystone-manage" --config-file "$conf" "$@" >>"$dir/keystone-manage.log" 2>&1; then
        echo "keystone: keystone-manage $1 failed; the end of $dir/keystone-manage.log:" >&2
        tail -n 30 "$dir/keystone-manage.log" >&2
        exit 1
    fi
}

pidfile="$dir/gunicorn.pid"
# Our gunicorn master: the pid in its file, if that process is a gunicorn working in
# $dir (a pid file left by a killed master may name an unrelated process by now).
master_alive() {
    local pid
    pid="$(cat "$pidfile" 2>/dev/null)" || return 1
    [ -n "$pid" ] && [ "$(readlink "/proc/$pid/cwd" 2>/dev/null)" = "$dir" ] &&
        grep -q gunicorn "/proc/$pid/cmdline" 2>/dev/null
}
up() { "$py" "$helper" wait "$url" "$1" keystone 2>/dev/null; }

# What a server runs: the venv (its path and pins) and the configuration. A server of
# ours from another venv (another checkout, older pins) or configuration is restarted.
served="$venv $(cat "$venv/.requirements-keystone.sha256") $(sha256sum "$conf" | cut -d' ' -f1)"

# Answering through our live master (not just through orphans of a killed one, whose
# pid file stays behind) with the same venv and configuration: left running. Without a
# pid file it is someone else's: left alone too.
if up 0 && { { master_alive && [ "$(cat "$dir/served-by" 2>/dev/null)" = "$served" ]; } ||
    [ ! -f "$pidfile" ]; }; then
    echo "keystone: already answering at $url"
else
    # A gunicorn of ours that no longer answers (hung, or half started) or runs
    # something else makes way.
    if master_alive; then
        kill "$(cat "$pidfile")"
        for _ in $(seq 50); do master_alive || break; sleep 0.1; done
    fi
    # Workers whose master was killed (kill -9) answer on its socket until they notice,
    # within a second or two: wait them out before binding the port again.
    for _ in $(seq 50); do up 0 || break; sleep 0.2; done

    # The database, keys and bootstrap, once per state dir and URL (each keystone-manage
    # takes seconds; all of them keep what exists when run again).
    stamp="$dir/.bootstrapped"
    want="$(sha256sum "$conf" | cut -d' ' -f1) $url"
    if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
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

    # Every setting in gunicorn's own config file (read from the working directory) and
    # none on the command line: keystone parses sys.argv with oslo.config and refuses
    # gunicorn's arguments. No control socket: the default one per user would clash
    # with Placement's gunicorn.
    cat >"$dir/gunicorn.conf.py" <<EOF
wsgi_app = "keystone.wsgi.api:application"
raw_env = ["OS_KEYSTONE_CONFIG_FILES=$conf"]
bind = "127.0.0.1:$port"
workers = $workers
timeout = 60
pidfile = "$pidfile"
errorlog = "-"
accesslog = "$dir/access.log"
proc_name = "verso-keystone"
control_socket_disable = True
EOF
    # In the background through setsid rather than gunicorn's daemon mode, which sends
    # the errors of its start (a refused pid file, a port in use) to /dev/null. A pid
    # file left by a master that was killed would make the new one refuse to start.
    rm -f "$pidfile"
    echo "$served" >"$dir/served-by"
    # Descriptors above 2 closed: a server must not keep a lock its caller holds (a
    # `flock` around the test run would stay held for as long as the server runs).
    (cd "$dir" && exec setsid "$venv/bin/gunicorn" </dev/null >>"$dir/gunicorn.log" 2>&1 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- &)
    if ! "$py" "$helper" wait "$url" "$wait_s" keystone; then
        echo "keystone: logs in $dir/gunicorn.log and $dir/keystone.log:" >&2
        tail -n 20 "$dir/gunicorn.log" "$dir/keystone.log" >&2 2>/dev/null || true
        exit 1
    fi
    echo "keystone: started on 127.0.0.1:$port (state and logs in $dir)"
fi

"$py" "$helper" keystone-objects "$url" "$accel_url"
echo "$url"
