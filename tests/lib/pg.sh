#!/usr/bin/env bash
# pg.sh - a throw-away PostgreSQL server for the tests and the benchmark: initdb and pg_ctl
# in a temporary directory, as a non-root user (CI runs as root: the server then runs as the
# system user apbot-pg, created when missing), listening on a Unix socket in that directory
# only (no TCP port), removed by `stop`.
#
#   pg.sh start STATE_DIR [--durable]   start a server; write STATE_DIR/env (see below)
#   pg.sh stop STATE_DIR                stop it and remove its directory
#   pg.sh down STATE_DIR [fast|immediate]  stop the server only (an outage; default fast:
#                                       sessions ended, WAL flushed; immediate: a crash)
#   pg.sh up STATE_DIR                  start it again after `down`
#   pg.sh restart STATE_DIR [SECONDS]   down (fast), SECONDS (default 0) without a server, up
#   pg.sh have                          exit 0 when server binaries are installed, else 1
#
# STATE_DIR/env holds shell-quoted KEY='VALUE' lines the tests read:
#   APBOT_TEST_PG           libpq connection string of the superuser `apbot` (trust auth)
#   APBOT_TEST_PG_DIR       the server's directory (data, socket, log)
#   APBOT_TEST_PG_PWUSER    a role that must log in with a password (scram-sha-256)
#   APBOT_TEST_PG_PASSWORD  its password
# Without --durable the server runs with fsync off (tests only; never for figures).
# When no PostgreSQL server binaries are installed, `start` says so, writes no env file and
# exits 0: the tests then skip their PostgreSQL part with that message. `scripts/deps.sh
# --test` installs them (Debian's postgresql package).
set -euo pipefail

cmd=${1:-}
state=${2:-}
[ -n "$cmd" ] && { [ -n "$state" ] || [ "$cmd" = have ]; } || { echo "usage: pg.sh start|stop|down|up|restart STATE_DIR [--durable] | have" >&2; exit 2; }
durable=no
[ "${3:-}" = "--durable" ] && durable=yes
pguser=apbot-pg
pwuser=apbot_pw

# The newest installed server's binaries (Debian keeps them out of PATH).
find_bindir() {
    local d best=""
    for d in $(pg_config --bindir 2>/dev/null) /usr/lib/postgresql/*/bin /usr/local/pgsql/bin; do
        [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && [ -x "$d/postgres" ] && best="$d"
    done
    if [ -z "$best" ] && command -v initdb >/dev/null 2>&1; then
        best=$(dirname "$(command -v initdb)")
    fi
    printf '%s' "$best"
}

if [ "$cmd" = have ]; then
    [ -n "$(find_bindir)" ] && exit 0
    echo "no PostgreSQL server binaries (initdb, pg_ctl) installed; 'scripts/deps.sh --test' installs them"
    exit 1
fi

# as_pg CMD...: runs CMD as the server's user (itself when not root).
as_pg() {
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u "$pguser" -- "$@"
    else
        "$@"
    fi
}

stop_server() { # DIR
    local dir=$1 bindir
    [ -d "$dir" ] || return 0
    bindir=$(find_bindir)
    if [ -n "$bindir" ] && [ -f "$dir/data/postmaster.pid" ]; then
        as_pg "$bindir/pg_ctl" -D "$dir/data" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
}

# The server of STATE_DIR/env: its directory, or exit 1.
state_dir() {
    local dir=""
    [ -f "$state/env" ] && dir=$(sed -n "s/^APBOT_TEST_PG_DIR='\(.*\)'$/\1/p" "$state/env")
    [ -n "$dir" ] && [ -d "$dir/data" ] || { echo "pg.sh: no server under $state" >&2; exit 1; }
    printf '%s' "$dir"
}

server_down() { # DIR MODE
    as_pg "$(find_bindir)/pg_ctl" -D "$1/data" -m "$2" -w -t 30 stop >/dev/null
}

server_up() { # DIR
    as_pg "$(find_bindir)/pg_ctl" -D "$1/data" -l "$1/server.log" -w -t 60 start >/dev/null ||
        { tail -20 "$1/server.log" >&2; exit 1; }
}

case "$cmd" in
down)
    mode=${3:-fast}
    case "$mode" in fast | immediate) ;; *) echo "pg.sh: down wants fast or immediate" >&2; exit 2 ;; esac
    server_down "$(state_dir)" "$mode"
    exit 0
    ;;
up)
    server_up "$(state_dir)"
    exit 0
    ;;
restart)
    dir=$(state_dir)
    server_down "$dir" fast
    sleep "${3:-0}"
    server_up "$dir"
    exit 0
    ;;
stop)
    if [ -f "$state/env" ]; then
        dir=$(sed -n "s/^APBOT_TEST_PG_DIR='\(.*\)'$/\1/p" "$state/env")
        [ -n "$dir" ] && stop_server "$dir"
        rm -f "$state/env"
    fi
    exit 0
    ;;
start) ;;
*)
    echo "pg.sh: unknown command $cmd" >&2
    exit 2
    ;;
esac

mkdir -p "$state"
# A server left behind by an interrupted run goes first.
"$0" stop "$state"

bindir=$(find_bindir)
if [ -z "$bindir" ]; then
    echo "SKIP: no PostgreSQL server binaries (initdb, pg_ctl) installed; 'scripts/deps.sh --test' installs them"
    exit 0
fi

if [ "$(id -u)" -eq 0 ] && ! id -u "$pguser" >/dev/null 2>&1; then
    useradd --system --user-group --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin "$pguser"
fi

# /tmp, not $TMPDIR: a Unix socket path must stay short (108 bytes).
dir=$(mktemp -d /tmp/apbot-pg.XXXXXX)
chmod 700 "$dir"
[ "$(id -u)" -eq 0 ] && chown "$pguser:" "$dir"
cleanup_failed() { stop_server "$dir"; }
trap cleanup_failed ERR

as_pg "$bindir/initdb" -D "$dir/data" -U apbot -A trust -E UTF8 --locale=C -N \
    >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
{
    echo "listen_addresses = ''"
    echo "unix_socket_directories = '$dir'"
    echo "port = 5432"
    echo "max_connections = 60"
    echo "shared_buffers = 32MB"
    if [ "$durable" = no ]; then
        echo "fsync = off"
        echo "full_page_writes = off"
        # An asynchronous commit waits for the WAL writer (or for store_sync): tests can see
        # store_sync flush it (test_store_durability).
        echo "wal_writer_delay = 10s"
    fi
} >>"$dir/data/postgresql.conf"
# The superuser logs in without a password; $pwuser only with one.
printf '%s\n' "local all apbot trust" "local all $pwuser scram-sha-256" >"$dir/data/pg_hba.conf"
as_pg "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null ||
    { cat "$dir/server.log" >&2; exit 1; }

password="pw-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
conn="host=$dir port=5432 user=apbot dbname=apbot"
"$bindir/psql" -X -q -v ON_ERROR_STOP=1 "host=$dir port=5432 user=apbot dbname=postgres" \
    -c "CREATE DATABASE apbot" \
    -c "CREATE ROLE $pwuser LOGIN PASSWORD '$password'" >/dev/null
"$bindir/psql" -X -q -v ON_ERROR_STOP=1 "$conn" \
    -c "GRANT ALL ON SCHEMA public TO $pwuser" >/dev/null

{
    echo "APBOT_TEST_PG='$conn'"
    echo "APBOT_TEST_PG_DIR='$dir'"
    echo "APBOT_TEST_PG_PWUSER='$pwuser'"
    echo "APBOT_TEST_PG_PASSWORD='$password'"
} >"$state/env.tmp"
mv "$state/env.tmp" "$state/env"
trap - ERR
echo "PostgreSQL $("$bindir/postgres" --version | awk '{print $3}') running on $dir (as $([ "$(id -u)" -eq 0 ] && echo "$pguser" || id -un))"
