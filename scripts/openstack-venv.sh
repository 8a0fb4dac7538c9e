#!/usr/bin/env bash
# Creates or updates .venv-openstack (Keystone, Placement and gunicorn, pinned in
# requirements-keystone.txt) when that file changed, like scripts/test.sh does for .venv.
# Used by scripts/start-keystone.sh and scripts/start-placement.sh; prints nothing on
# success when the venv is already current. Their oslo.* pins differ from
# openstack-cyborg 17's, hence a venv of their own.
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${VERSO_OPENSTACK_VENV:-$PWD/.venv-openstack}"
req="$PWD/requirements-keystone.txt"
stamp="$venv/.requirements-keystone.sha256"
want="$(sha256sum "$req" | cut -d' ' -f1)"

current() { [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; }

current && exit 0
# Both start scripts may run at once: one of them builds, the other waits for it.
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9
current && exit 0

python="${VERSO_OPENSTACK_PYTHON:-python3}"
if ! "$python" -c "import ensurepip, venv" 2>/dev/null; then
    echo "openstack-venv: $python lacks venv/ensurepip (apt-get install -y python3-venv)" >&2
    exit 1
fi
echo "openstack-venv: installing $req into $venv" >&2
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check --no-deps -r "$req"
"$venv/bin/pip" check >/dev/null
echo "$want" >"$stamp"
