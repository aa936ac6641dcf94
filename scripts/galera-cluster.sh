#!/usr/bin/env bash
# A MariaDB Galera cluster of three nodes on this host, behind HAProxy, for tests and trials:
# its own data directory, its own ports, nothing shared with the machine's MariaDB.
#
#   scripts/galera-cluster.sh start | stop | status
#   scripts/galera-cluster.sh proxy           # each node as HAProxy sees it (UP only if Synced)
#   scripts/galera-cluster.sh kill-node N     # SIGKILL node N (1-3): the loss of its host
#   scripts/galera-cluster.sh start-node N    # N rejoins (IST from a donor's gcache, else SST)
#
# GALERA_DIR        state directory                   (default /tmp/memory-galera)
# GALERA_PORT       node 1's MySQL port; nodes 2, 3 +1, +2  (default 3307)
# GALERA_PROXY_PORT HAProxy's MySQL port              (default 3310)
# GALERA_BASE_PORT  node N's group port is BASE+10N, its IST port +1, its SST port +2
#                                                     (default 14557: 14567, 14577, 14587)
#
# `start` prints DATABASE_URL for the service (through HAProxy). root@127.0.0.1 has no
# password, as on the machine's own server; this is a test cluster.
set -euo pipefail

DIR="${GALERA_DIR:-/tmp/memory-galera}"
PORT="${GALERA_PORT:-3307}"
PROXY_PORT="${GALERA_PROXY_PORT:-3310}"
BASE="${GALERA_BASE_PORT:-14557}"
HOST=127.0.0.1
PROVIDER="${GALERA_PROVIDER:-/usr/lib/galera/libgalera_smm.so}"
CHECK="$(cd "$(dirname "$0")" && pwd)/galera-node-check.sh"

node_port() { echo $((PORT + $1 - 1)); }
group_port() { echo $((BASE + 10 * $1)); }
node_dir() { echo "$DIR/node$1"; }
sql() {  # node, statement
  mariadb --protocol=socket -S "$(node_dir "$1")/mysqld.sock" -uroot -N -B -e "$2"
}

write_config() {
  local n=$1 d
  d=$(node_dir "$n")
  local members
  members=$(for i in 1 2 3; do printf '%s:%s,' "$HOST" "$(group_port "$i")"; done)
  cat >"$d/my.cnf" <<CNF
[mysqld]
# Not root: the rsync SST daemon a joiner starts would drop to nobody and fail.
user=mysql
datadir=$d/data
socket=$d/mysqld.sock
pid-file=$d/mysqld.pid
log-error=$d/error.log
port=$(node_port "$n")
bind-address=$HOST
character-set-server=utf8mb4
collation-server=utf8mb4_unicode_ci
# Small: three of these share a developer's machine.
innodb_buffer_pool_size=64M
innodb_log_file_size=32M
max_connections=300
performance_schema=OFF
# What Galera needs: row events, InnoDB, and no table-level AUTO-INC lock.
binlog_format=ROW
default_storage_engine=InnoDB
innodb_autoinc_lock_mode=2
innodb_flush_log_at_trx_commit=2
wsrep_on=ON
wsrep_provider=$PROVIDER
wsrep_cluster_name=memory-test
wsrep_cluster_address=gcomm://${members%,}
wsrep_node_name=node$n
wsrep_node_address=$HOST:$(group_port "$n")
wsrep_sst_method=rsync
wsrep_sst_receive_address=$HOST:$(( $(group_port "$n") + 2 ))
# Short timeouts, so a killed node leaves the primary component in seconds, not 15+.
wsrep_provider_options="gmcast.listen_addr=tcp://$HOST:$(group_port "$n");ist.recv_addr=$HOST:$(( $(group_port "$n") + 1 ));gcache.size=256M;evs.suspect_timeout=PT3S;evs.inactive_timeout=PT6S;evs.keepalive_period=PT1S;evs.inactive_check_period=PT1S;pc.recovery=false"
CNF
}

wait_synced() {  # node, seconds
  for _ in $(seq $(( $2 * 4 ))); do
    [ "$(sql "$1" "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME='wsrep_local_state_comment'" 2>/dev/null)" = Synced ] && return 0
    if ! kill -0 "$(cat "$(node_dir "$1")/launched.pid")" 2>/dev/null; then
      echo "node $1 died; its log:" >&2
      tail -30 "$(node_dir "$1")/error.log" >&2
      return 1
    fi
    sleep 0.25
  done
  echo "node $1 did not reach Synced in $2 s; its log:" >&2
  tail -30 "$(node_dir "$1")/error.log" >&2
  return 1
}

start_node() {  # node [--wsrep-new-cluster]
  local n=$1 d
  d=$(node_dir "$n")
  # Detached, output to its log: the caller (a test) must not wait on it.
  setsid /usr/sbin/mariadbd --defaults-file="$d/my.cnf" ${2:-} >>"$d/error.log" 2>&1 </dev/null &
  echo $! >"$d/launched.pid"
  wait_synced "$n" "${GALERA_START_TIMEOUT_S:-120}"
}

node_pid() { cat "$(node_dir "$1")/launched.pid" 2>/dev/null || true; }

start_proxy() {
  cat >"$DIR/haproxy.cfg" <<CFG
global
    maxconn 4000
    pidfile $DIR/haproxy.pid
    daemon
    # The health check is a script (below): HAProxy runs it as a child process.
    external-check
    insecure-fork-wanted
    # What HAProxy thinks of each node: galera-cluster.sh proxy.
    stats socket $DIR/haproxy.sock mode 600 level admin
defaults
    mode tcp
    timeout connect 2s
    timeout client 1h
    timeout server 1h
listen galera
    bind $HOST:$PROXY_PORT
    # Every node takes writes (multi-primary): connections go round the live nodes.
    balance roundrobin
    # Sync-aware: a node is in the rotation only while it is Synced, not merely answering
    # (a joiner, a donor or a desynced node would serve stale rows or refuse queries).
    option external-check
    external-check path "/usr/bin:/bin"
    external-check command $CHECK
    # A node that stops answering or leaves Synced is out within ~2 s, and its open sessions
    # are closed, so pooled connections fail fast and reconnect to a synced node.
    default-server inter 1s fall 2 rise 2 on-marked-down shutdown-sessions
$(for i in 1 2 3; do echo "    server node$i $HOST:$(node_port "$i") check"; done)
CFG
  haproxy -f "$DIR/haproxy.cfg"
}

case "${1:-}" in
  start)
    mkdir -p "$DIR"
    # The server runs as mysql: it must reach its directory inside ours (a test's is 0700).
    chmod 755 "$DIR"
    for n in 1 2 3; do
      d=$(node_dir "$n")
      mkdir -p "$d"
      chown mysql:mysql "$d"
      write_config "$n"
      mariadb-install-db --defaults-file="$d/my.cnf" --auth-root-authentication-method=normal \
        --skip-test-db >"$d/install.log" 2>&1
    done
    start_node 1 --wsrep-new-cluster
    # Replicated to the joiners by their SST: the service's and HAProxy's users.
    sql 1 "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1';
           GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
           CREATE USER IF NOT EXISTS 'haproxy'@'127.0.0.1';"
    start_node 2
    start_node 3
    start_proxy
    echo "DATABASE_URL=mysql+pymysql://root@$HOST:$PROXY_PORT/memory?charset=utf8mb4"
    ;;
  stop)
    # The data directory goes with the cluster, so a clean shutdown (seconds a node, flushing
    # what is deleted next) buys nothing: SIGKILL, then wait for the processes to be gone.
    [ -f "$DIR/haproxy.pid" ] && kill "$(cat "$DIR/haproxy.pid")" 2>/dev/null || true
    for n in 3 2 1; do
      pid=$(node_pid "$n")
      [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
    done
    for n in 3 2 1; do
      pid=$(node_pid "$n")
      for _ in $(seq 100); do
        [ -n "$pid" ] && [ -n "$(ps -o stat= -p "$pid" | grep -v '^Z')" ] || break
        sleep 0.05
      done
    done
    rm -rf "$DIR"
    ;;
  status)
    for n in 1 2 3; do
      printf 'node%s :%s ' "$n" "$(node_port "$n")"
      sql "$n" "SELECT GROUP_CONCAT(VARIABLE_VALUE) FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME IN ('wsrep_local_state_comment','wsrep_cluster_size')" 2>/dev/null || echo down
    done
    ;;
  proxy)  # each node as HAProxy sees it: UP, DOWN (and why), or MAINT
    echo "show stat" | socat stdio "unix-connect:$DIR/haproxy.sock" \
      | awk -F, '$1 == "galera" && $2 ~ /^node/ {print $2, $18, $37}'
    ;;
  kill-node)
    n="${2:?node 1-3}"
    kill -9 "$(node_pid "$n")"
    ;;
  start-node)
    n="${2:?node 1-3}"
    start_node "$n"
    ;;
  *)
    echo "usage: $0 start|stop|status|proxy|kill-node N|start-node N" >&2
    exit 2
    ;;
esac
