# shellcheck shell=bash
# A gunicorn-served OpenStack API for the tests, as scripts/start-keystone.sh and
# scripts/start-placement.sh run it: sourced by them, it defines functions only.
# The caller sets first:
#   name     the service, for messages and gunicorn's proc_name (verso-$name)
#   dir      the state dir (absolute): pid file, gunicorn.conf.py, logs, served-by
#   port     loopback port served;  workers  gunicorn workers;  wait_s  start timeout
#   health   a URL that answers once the service is up
#   venv, py, helper  the OpenStack venv, its python, scripts/openstack-services.py
#   conf     the service's configuration file (a change restarts the server)

# Makes the state dir $dir and turns it into its physical path (gunicorn's working
# directory, which gunicorn_master_alive compares with /proc/PID/cwd).
gunicorn_state_dir() {
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd -P)"
}

# Writes its input to $1 only when it differs: an unchanged configuration keeps its
# file as it was.
gunicorn_write_changed() {
    cat >"$1.new"
    if cmp -s "$1.new" "$1"; then rm "$1.new"; else mv "$1.new" "$1"; fi
}

# Our gunicorn master: the pid in its file, if that process is a gunicorn working in
# $dir (a pid file left by a killed master may name an unrelated process by now).
gunicorn_master_alive() {
    local pid
    pid="$(cat "$dir/gunicorn.pid" 2>/dev/null)" || return 1
    [ -n "$pid" ] && [ "$(readlink "/proc/$pid/cwd" 2>/dev/null)" = "$dir" ] &&
        grep -q gunicorn "/proc/$pid/cmdline" 2>/dev/null
}

# Whether $health answers within $1 seconds.
gunicorn_up() { "$py" "$helper" wait "$health" "$1" "$name" 2>/dev/null; }

# What a server runs: the venv (its path and pins) and the configuration. A server of
# ours from another venv (another checkout, older pins) or configuration is restarted.
gunicorn_served() {
    echo "$venv $(cat "$venv/.requirements-keystone.sha256") $(sha256sum "$conf" | cut -d' ' -f1)"
}

# Answering through our live master (not just through orphans of a killed one, whose
# pid file stays behind) with the same venv and configuration: to be left running.
# Without a pid file it is someone else's: left alone too.
gunicorn_running() {
    gunicorn_up 0 && {
        { gunicorn_master_alive && [ "$(cat "$dir/served-by" 2>/dev/null)" = "$(gunicorn_served)" ]; } ||
            [ ! -f "$dir/gunicorn.pid" ]
    }
}

# A gunicorn of ours that no longer answers (hung, or half started) or runs something
# else makes way.
gunicorn_make_way() {
    if gunicorn_master_alive; then
        kill "$(cat "$dir/gunicorn.pid")"
        for _ in $(seq 50); do gunicorn_master_alive || break; sleep 0.1; done
    fi
    # Workers whose master was killed (kill -9) answer on its socket until they notice,
    # within a second or two: wait them out before binding the port again.
    for _ in $(seq 50); do gunicorn_up 0 || break; sleep 0.2; done
}

# Starts gunicorn serving the WSGI application $1 with the environment entry $2, and
# waits until $health answers (exits 1 with the logs' ends if it does not).
gunicorn_start() {
    # Every setting in gunicorn's own config file (read from the working directory) and
    # none on the command line: keystone parses sys.argv with oslo.config and refuses
    # gunicorn's arguments. No control socket: the default one per user would make two
    # services clash.
    cat >"$dir/gunicorn.conf.py" <<EOF
wsgi_app = "$1"
raw_env = ["$2"]
bind = "127.0.0.1:$port"
workers = $workers
timeout = 60
pidfile = "$dir/gunicorn.pid"
errorlog = "-"
accesslog = "$dir/access.log"
proc_name = "verso-$name"
control_socket_disable = True
EOF
    # In the background through setsid rather than gunicorn's daemon mode, which sends
    # the errors of its start (a refused pid file, a port in use) to /dev/null. A pid
    # file left by a master that was killed would make the new one refuse to start.
    rm -f "$dir/gunicorn.pid"
    gunicorn_served >"$dir/served-by"
    # Descriptors above 2 closed: a server must not keep a lock its caller holds (a
    # `flock` around the test run would stay held for as long as the server runs).
    (cd "$dir" && exec setsid "$venv/bin/gunicorn" </dev/null >>"$dir/gunicorn.log" 2>&1 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- &)
    if ! "$py" "$helper" wait "$health" "$wait_s" "$name"; then
        echo "$name: logs in $dir/gunicorn.log and $dir/$name.log:" >&2
        tail -n 20 "$dir/gunicorn.log" "$dir/$name.log" >&2 2>/dev/null || true
        exit 1
    fi
    echo "$name: started on 127.0.0.1:$port (state and logs in $dir)"
}

# The whole start: a server of ours that answers with the same venv and configuration
# is left running; otherwise, one in the way stopped, the function $1 run (database,
# bootstrap) and gunicorn started as gunicorn_start "$2" "$3".
gunicorn_serve() {
    if gunicorn_running; then
        echo "$name: already answering at $health"
        return
    fi
    gunicorn_make_way
    "$1"
    gunicorn_start "$2" "$3"
}

# For a service behind the test Keystone ($name, $venv, $keystone set): the venv made or
# updated, $py and $helper set, and Keystone answering (else the script stops, saying
# what to run first).
gunicorn_behind_keystone() {
    "$root/scripts/openstack-venv.sh"
    py="$venv/bin/python"
    helper="$root/scripts/openstack-services.py"
    if ! "$py" "$helper" wait "$keystone/v3" 0 keystone 2>/dev/null; then
        echo "$name: no Keystone at $keystone/v3 (run scripts/start-keystone.sh first)" >&2
        exit 1
    fi
}
