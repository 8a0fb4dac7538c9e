#!/usr/bin/env bash
# Starts a real Placement for the tests (the PyPI openstack-placement package on
# SQLite), on loopback only, behind the Keystone of scripts/start-keystone.sh (which must
# be answering: run that first).
#
#   scripts/start-placement.sh       # prints the URL the tests use on its last line
#
# Placement lives in .venv-openstack with Keystone (scripts/openstack-venv.sh). The state
# (placement.conf, placement.db, logs, gunicorn's pid) is in $VERSO_PLACEMENT_DIR
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

dir="${VERSO_PLACEMENT_DIR:-/tmp/verso-placement}"
port="${VERSO_PLACEMENT_PORT:-55001}"
keystone_port="${VERSO_KEYSTONE_PORT:-55000}"
wait_s="${VERSO_PLACEMENT_WAIT_SECONDS:-60}"
workers="${VERSO_PLACEMENT_WORKERS:-2}"
venv="${VERSO_OPENSTACK_VENV:-$root/.venv-openstack}"
keystone="http://127.0.0.1:$keystone_port"
url="http://127.0.0.1:$port"

scripts/openstack-venv.sh
py="$venv/bin/python"
helper="$root/scripts/openstack-services.py"

if ! "$py" "$helper" wait "$keystone/v3" 0 keystone 2>/dev/null; then
    echo "placement: no Keystone at $keystone/v3 (run scripts/start-keystone.sh first)" >&2
    exit 1
fi

mkdir -p "$dir"
dir="$(cd "$dir" && pwd -P)"
conf="$dir/placement.conf"
cat >"$conf.new" <<EOF
[DEFAULT]
log_file = $dir/placement.log
[api]
auth_strategy = keystone
[placement_database]
connection = sqlite:///$dir/placement.db
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
if cmp -s "$conf.new" "$conf"; then rm "$conf.new"; else mv "$conf.new" "$conf"; fi

pidfile="$dir/gunicorn.pid"
# Our gunicorn master: the pid in its file, if that process is a gunicorn working in
# $dir (a pid file left by a killed master may name an unrelated process by now).
master_alive() {
    local pid
    pid="$(cat "$pidfile" 2>/dev/null)" || return 1
    [ -n "$pid" ] && [ "$(readlink "/proc/$pid/cwd" 2>/dev/null)" = "$dir" ] &&
        grep -q gunicorn "/proc/$pid/cmdline" 2>/dev/null
}
up() { "$py" "$helper" wait "$url/" "$1" placement 2>/dev/null; }

# What a server runs: the venv (its path and pins) and the configuration. A server of
# ours from another venv (another checkout, older pins) or configuration is restarted.
served="$venv $(cat "$venv/.requirements-keystone.sha256") $(sha256sum "$conf" | cut -d' ' -f1)"

# Answering through our live master (not just through orphans of a killed one, whose
# pid file stays behind) with the same venv and configuration: left running. Without a
# pid file it is someone else's: left alone too.
if up 0 && { { master_alive && [ "$(cat "$dir/served-by" 2>/dev/null)" = "$served" ]; } ||
    [ ! -f "$pidfile" ]; }; then
    echo "placement: already answering at $url"
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

    # The schema, once per state dir and configuration (db sync takes seconds).
    stamp="$dir/.synced"
    want="$(sha256sum "$conf" | cut -d' ' -f1)"
    if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
        if ! "$venv/bin/placement-manage" --config-file "$conf" db sync \
            >>"$dir/placement-manage.log" 2>&1; then
            echo "placement: db sync failed; the end of $dir/placement-manage.log:" >&2
            tail -n 30 "$dir/placement-manage.log" >&2
            exit 1
        fi
        echo "$want" >"$stamp"
    fi

    # As for Keystone: settings in gunicorn's config file, no control socket (the
    # default one per user would clash with Keystone's gunicorn).
    cat >"$dir/gunicorn.conf.py" <<EOF
wsgi_app = "placement.wsgi.api:application"
raw_env = ["OS_PLACEMENT_CONFIG_DIR=$dir"]
bind = "127.0.0.1:$port"
workers = $workers
timeout = 60
pidfile = "$pidfile"
errorlog = "-"
accesslog = "$dir/access.log"
proc_name = "verso-placement"
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
    if ! "$py" "$helper" wait "$url/" "$wait_s" placement; then
        echo "placement: logs in $dir/gunicorn.log and $dir/placement.log:" >&2
        tail -n 20 "$dir/gunicorn.log" "$dir/placement.log" >&2 2>/dev/null || true
        exit 1
    fi
    echo "placement: started on 127.0.0.1:$port (state and logs in $dir)"
fi

"$py" "$helper" placement-endpoint "$keystone/v3" "$url"
echo "$url"
