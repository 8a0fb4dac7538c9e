# shellcheck shell=bash
# The test MariaDB (scripts/start-mariadb.sh) as the database of a gunicorn-served
# OpenStack service: sourced by scripts/start-keystone.sh, start-placement.sh and
# start-glance.sh, it defines functions only. Not SQLite for these services: SQLite
# answers "database is locked" (a 500 to the client) when two workers write at once,
# and Keystone writes on every password login (the user's last_active_at), Placement on
# every allocation, Glance on every image.

mariadb_sock="${VERSO_MARIADB_DIR:-/tmp/verso-mariadb}/mysqld.sock"
mariadb_port="${VERSO_MARIADB_PORT:-55306}"

# Makes database $1 and user $2 (password $3, from loopback) with all rights on it,
# through the server's root socket; both kept when they exist. Prints the SQLAlchemy
# URL the service connects with.
mariadb_service_database() {
    if ! mariadb --socket="$mariadb_sock" -uroot <<SQL; then
CREATE DATABASE IF NOT EXISTS \`$1\` CHARACTER SET utf8mb4;
CREATE USER IF NOT EXISTS '$2'@'127.0.0.1' IDENTIFIED BY '$3';
GRANT ALL PRIVILEGES ON \`$1\`.* TO '$2'@'127.0.0.1';
SQL
        echo "$1: the test MariaDB does not answer on $mariadb_sock: run scripts/start-mariadb.sh first" >&2
        return 1
    fi
    echo "mysql+pymysql://$2:$3@127.0.0.1:$mariadb_port/$1?charset=utf8mb4"
}

# Whether database $1 has table $2 (a MariaDB made afresh has no tables, whatever a
# service's sync stamp says).
mariadb_has_table() {
    [ "$(mariadb --socket="$mariadb_sock" -uroot -N -e \
        "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = '$1' AND table_name = '$2'")" = 1 ]
}
