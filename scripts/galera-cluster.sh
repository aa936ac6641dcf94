#!/usr/bin/env bash
# A MariaDB Galera cluster of three nodes on this host, behind HAProxy, for tests and trials:
# its own data directory, its own ports, nothing shared with the machine's MariaDB.
#
#   scripts/galera-cluster.sh start | stop | status
#   scripts/galera-cluster.sh proxy           # each node as HAProxy sees it (galera-node-check.sh)
#   scripts/galera-cluster.sh kill-node N     # SIGKILL node N (1-3): the loss of its host
#   scripts/galera-cluster.sh stop-node N     # a clean shutdown of node N
#   scripts/galera-cluster.sh start-node N    # N rejoins: its position recovered, so IST from
#                                             # a donor's gcache, else SST (mariabackup, TLS)
#   scripts/galera-cluster.sh positions       # each stopped node's recovered position
#   scripts/galera-cluster.sh bootstrap [N]   # after a total outage: N (default: the most
#                                             # advanced) starts a new primary component
#   scripts/galera-cluster.sh transfers N     # how node N joined, each time: IST or SST
#
# GALERA_DIR        state directory                   (default /tmp/memory-galera)
# GALERA_PORT       node 1's MySQL port; nodes 2, 3 +1, +2  (default 3307)
# GALERA_PROXY_PORT HAProxy's MySQL port              (default 3310)
# GALERA_BASE_PORT  node N's group port is BASE+10N, its IST port +1, its SST port +2
#                                                     (default 14557: 14567, 14577, 14587)
#
# `start` prints DATABASE_URL for the service (through HAProxy, the one writer). Secrets are
# made per cluster and kept in GALERA_DIR (owner-only): passwords for root, the SST user and
# HAProxy's check user (secrets.env, client.cnf), and a CA with one certificate for the nodes'
# client connections, group communication, IST and SST (tls/). The service connects over TLS
# (`ssl_ca` in its URL); root over TCP is REQUIRE SSL.
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
# root's option file; until `start` has set root's password, none (mariadb-install-db's root).
CLIENT_CNF="$DIR/client.cnf"
sql() {  # node, statement
  mariadb --defaults-extra-file="$CLIENT_CNF" --protocol=socket \
    -S "$(node_dir "$1")/mysqld.sock" -N -B -e "$2"
}

make_secrets() {
  umask 077
  password() { openssl rand -hex 16; }
  cat >"$DIR/secrets.env" <<ENV
ROOT_PASSWORD=$(password)
SST_PASSWORD=$(password)
CHECK_PASSWORD=$(password)
ENV
  # shellcheck source=/dev/null
  . "$DIR/secrets.env"
  printf '[client]\nuser=root\npassword=%s\n' "$ROOT_PASSWORD" >"$DIR/client.cnf"
  # HAProxy's check reads its user from here (galera-node-check.sh).
  printf '[client]\nuser=haproxy\npassword=%s\nssl-ca=%s\n' "$CHECK_PASSWORD" \
    "$DIR/tls/ca.pem" >"$DIR/check.cnf"
  mkdir -p "$DIR/tls"
  openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=memory-galera-ca" \
    -keyout "$DIR/tls/ca-key.pem" -out "$DIR/tls/ca.pem" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout "$DIR/tls/node-key.pem" \
    -out "$DIR/tls/node.csr" 2>/dev/null
  printf 'subjectAltName=IP:%s,DNS:localhost\n' "$HOST" >"$DIR/tls/san.ext"
  openssl x509 -req -in "$DIR/tls/node.csr" -CA "$DIR/tls/ca.pem" -CAkey "$DIR/tls/ca-key.pem" \
    -CAcreateserial -days 30 -extfile "$DIR/tls/san.ext" -out "$DIR/tls/node.pem" 2>/dev/null
  # The servers (user mysql) and the SST scripts they run read the key; the CA's key stays ours.
  chown mysql:mysql "$DIR/tls/node-key.pem" "$DIR/tls/node.pem"
  chmod 755 "$DIR/tls"
  chmod 644 "$DIR/tls/ca.pem" "$DIR/tls/node.pem"
  umask 022
}

write_config() {
  local n=$1 d
  d=$(node_dir "$n")
  local members
  members=$(for i in 1 2 3; do printf '%s:%s,' "$HOST" "$(group_port "$i")"; done)
  local tls="$DIR/tls"
  # shellcheck source=/dev/null
  . "$DIR/secrets.env"
  cat >"$d/my.cnf" <<CNF
[mysqld]
# Not root: the SST scripts a joiner starts run as the server's user.
user=mysql
datadir=$d/data
socket=$d/mysqld.sock
pid-file=$d/mysqld.pid
log-error=$d/error.log
port=$(node_port "$n")
bind-address=$HOST
# Accounts by address, not by a resolved name: 127.0.0.1 is root@127.0.0.1 (REQUIRE SSL), never
# root@localhost (the socket's).
skip-name-resolve
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
# Client connections over TLS (root over TCP must use it: REQUIRE SSL).
ssl_ca=$tls/ca.pem
ssl_cert=$tls/node.pem
ssl_key=$tls/node-key.pem
# A binary log with cluster-wide GTIDs on every node: what a replica outside the cluster (a
# migration to MySQL 8 or TiDB, a point-in-time restore) follows, from any node. One server_id
# and GTID domain for the cluster's replicated writes; a node's own (local) writes get its own.
log_bin=mariadb-bin
log_slave_updates=ON
server_id=1
wsrep_gtid_mode=ON
wsrep_gtid_domain_id=1
gtid_domain_id=$((10 + n))
binlog_expire_logs_seconds=604800
wsrep_on=ON
wsrep_provider=$PROVIDER
# Its own name: a node of another cluster on this host that reaches one of these ports (an
# old member's address reused) is refused, not merged.
wsrep_cluster_name=memory-$(basename "$DIR")
wsrep_cluster_address=gcomm://${members%,}
wsrep_node_name=node$n
wsrep_node_address=$HOST:$(group_port "$n")
# A full copy (when IST cannot serve a joiner) by mariabackup: the donor is locked only for a
# moment (BACKUP STAGE), so it stays readable and writable meanwhile; over TLS, as its own user.
wsrep_sst_method=mariabackup
wsrep_sst_auth=sst:$SST_PASSWORD
wsrep_sst_receive_address=$HOST:$(( $(group_port "$n") + 2 ))
# A short suspect timeout, so a killed node leaves the primary component (and stops stalling
# the others' commits) in 3 s, not 5; the inactive and install timeouts stay at their
# defaults: shorter ones (6 s / 3 s) let the two survivors fail to agree on their new view on a
# busy machine, and both fell to non-primary. Group communication and IST over TLS (socket.ssl_*). pc.recovery (the default) lets the
# nodes of a primary component re-form it by themselves after all of them stopped.
wsrep_provider_options="gmcast.listen_addr=tcp://$HOST:$(group_port "$n");ist.recv_addr=$HOST:$(( $(group_port "$n") + 1 ));gcache.size=256M;evs.suspect_timeout=PT3S;evs.inactive_timeout=PT15S;evs.install_timeout=PT7.5S;evs.keepalive_period=PT1S;evs.inactive_check_period=PT1S;pc.recovery=true;socket.ssl=yes;socket.ssl_ca=$tls/ca.pem;socket.ssl_cert=$tls/node.pem;socket.ssl_key=$tls/node-key.pem"

[sst]
# No copies of the SST logs in /tmp/sst_log_archive: they stay in the node's error log.
sst-log-archive=0
encrypt=3
tca=$tls/ca.pem
tcert=$tls/node.pem
tkey=$tls/node-key.pem
CNF
  # It holds the SST password: the server's user reads it, nobody else.
  chown root:mysql "$d/my.cnf"
  chmod 640 "$d/my.cnf"
}

wait_synced() {  # node, seconds
  for _ in $(seq $(( $2 * 4 ))); do
    [ "$(sql "$1" "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME='wsrep_local_state_comment'" 2>/dev/null)" = Synced ] && return 0
    if ! alive "$(node_pid "$1")"; then
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

grastate() {  # node, field: uuid, seqno or safe_to_bootstrap from its grastate.dat
  sed -n "s/^$2:[[:space:]]*//p" "$(node_dir "$1")/data/grastate.dat" 2>/dev/null
}

recover_position() {  # node: its last committed uuid:seqno
  # A node that stopped cleanly wrote its position to grastate.dat; one that was killed left
  # seqno -1 there, and a joiner that cannot say where it stopped gets a full copy (SST). Its
  # position is still in InnoDB: `mariadbd --wsrep-recover` reads it (what galera_recovery
  # does for systemd), and the start passes it on, so the donor can send only what is missing
  # (IST).
  local n=$1 d seqno
  d=$(node_dir "$n")
  seqno=$(grastate "$n" seqno)
  if [ -n "$seqno" ] && [ "$seqno" != -1 ]; then
    echo "$(grastate "$n" uuid):$seqno"
    return
  fi
  : >"$d/recover.log"
  chown mysql:mysql "$d/recover.log"
  /usr/sbin/mariadbd --defaults-file="$d/my.cnf" --wsrep-recover --log-error="$d/recover.log" \
    >/dev/null 2>&1 </dev/null || true
  sed -n 's/.*WSREP: Recovered position: *//p' "$d/recover.log" | tail -1
}

start_node() {  # node [--wsrep-new-cluster]
  local n=$1 d position
  d=$(node_dir "$n")
  if alive "$(node_pid "$n")"; then
    echo "node $n is running" >&2
    return 1
  fi
  position=$(recover_position "$n")
  echo "$(date -u +%FT%TZ) start node$n at ${position:-unknown}" >>"$d/starts.log"
  # Detached, output to its log: the caller (a test) must not wait on it.
  setsid /usr/sbin/mariadbd --defaults-file="$d/my.cnf" ${2:-} \
    ${position:+--wsrep-start-position="$position"} >>"$d/error.log" 2>&1 </dev/null &
  echo $! >"$d/launched.pid"
  wait_synced "$n" "${GALERA_START_TIMEOUT_S:-120}"
}

stop_node() {  # node: a clean shutdown, which writes the node's position to grastate.dat
  local n=$1 pid
  pid=$(node_pid "$n")
  sql "$n" "SHUTDOWN" 2>/dev/null || true
  for _ in $(seq 600); do
    alive "$pid" || return 0
    sleep 0.1
  done
  echo "node $n did not stop in 60 s" >&2
  return 1
}

most_advanced() {  # the stopped node with the highest recovered seqno
  local best=1 best_seqno=-2 n seqno
  for n in 1 2 3; do
    seqno=$(recover_position "$n" | sed 's/.*://; s/,.*//')
    if [ "${seqno:--1}" -gt "$best_seqno" ]; then best=$n; best_seqno=$seqno; fi
  done
  echo "$best"
}

node_pid() { cat "$(node_dir "$1")/launched.pid" 2>/dev/null || true; }
# Alive, not a zombie waiting for init to reap it (kill -0 succeeds on those).
alive() { [ -n "$1" ] && [ -n "$(ps -o stat= -p "$1" | grep -v '^Z')" ]; }

start_proxy() {
  # The check runs as HAProxy's child with an environment of HAProxy's making: a wrapper names
  # the check user's credentials (check.cnf).
  printf '#!/bin/sh\nGALERA_CHECK_CNF=%s exec %s "$@"\n' "$DIR/check.cnf" "$CHECK" \
    >"$DIR/node-check"
  chmod 700 "$DIR/node-check"
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
    # One writer: every connection goes to node 1 while it is up; the others are hot standbys
    # (\`backup\`), the first of them taking every connection while node 1 is down. Writes
    # through one node never meet at certification (no conflicts from concurrent writers on
    # two nodes); node 1 takes the connections back once it is Synced again, and the backup's
    # sessions are closed then, so two nodes are never written through for long.
    option external-check
    external-check path "/usr/bin:/bin"
    external-check command $DIR/node-check
    # Sync-aware: a node is in the rotation only while it is Synced (or donating by
    # mariabackup, which does not block it), not merely answering (a joiner or a desynced node
    # would serve stale rows or refuse queries). Down within inter x fall (~2 s): its open
    # sessions are closed, so pooled connections fail fast and reconnect to the next node.
    default-server inter 1s fall 2 rise 2 on-marked-down shutdown-sessions
    server node1 $HOST:$(node_port 1) check on-marked-up shutdown-backup-sessions
    server node2 $HOST:$(node_port 2) check backup
    server node3 $HOST:$(node_port 3) check backup
CFG
  haproxy -f "$DIR/haproxy.cfg"
}

case "${1:-}" in
  start)
    mkdir -p "$DIR"
    # The server runs as mysql: it must reach its directory inside ours (a test's is 0700).
    chmod 755 "$DIR"
    make_secrets
    for n in 1 2 3; do
      d=$(node_dir "$n")
      mkdir -p "$d"
      chown mysql:mysql "$d"
      write_config "$n"
      mariadb-install-db --defaults-file="$d/my.cnf" --auth-root-authentication-method=normal \
        --skip-test-db >"$d/install.log" 2>&1
    done
    CLIENT_CNF=/dev/null start_node 1 --wsrep-new-cluster
    # Replicated to the joiners by their SST: root with its password (TLS over TCP), the SST
    # user with what mariabackup needs on a donor, HAProxy's check user with no privileges.
    CLIENT_CNF=/dev/null sql 1 "
      ALTER USER 'root'@'localhost' IDENTIFIED BY '$ROOT_PASSWORD';
      CREATE OR REPLACE USER 'root'@'$HOST' IDENTIFIED BY '$ROOT_PASSWORD' REQUIRE SSL;
      GRANT ALL ON *.* TO 'root'@'$HOST' WITH GRANT OPTION;
      CREATE USER 'sst'@'localhost' IDENTIFIED BY '$SST_PASSWORD';
      GRANT RELOAD, PROCESS, LOCK TABLES, BINLOG MONITOR ON *.* TO 'sst'@'localhost';
      CREATE USER 'haproxy'@'$HOST' IDENTIFIED BY '$CHECK_PASSWORD';"
    start_node 2
    start_node 3
    start_proxy
    echo "DATABASE_URL=mysql+pymysql://root:$ROOT_PASSWORD@$HOST:$PROXY_PORT/memory?charset=utf8mb4&ssl_ca=$DIR/tls/ca.pem"
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
        alive "$pid" || break
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
  stop-node)
    stop_node "${2:?node 1-3}"
    ;;
  positions)  # each stopped node: its recovered uuid:seqno and whether it may bootstrap
    for n in 1 2 3; do
      echo "node$n $(recover_position "$n") safe_to_bootstrap=$(grastate "$n" safe_to_bootstrap)"
    done
    ;;
  bootstrap)
    # After a total outage no primary component is left to join: one node starts a new one.
    # It must be the most advanced (highest seqno), or what only the others committed is lost
    # (they would refuse to join it). Galera marks a node safe to bootstrap only when it
    # stopped last and cleanly; after a crash of all nodes none is, so it is marked here.
    n="${2:-$(most_advanced)}"
    sed -i 's/^safe_to_bootstrap:.*/safe_to_bootstrap: 1/' "$(node_dir "$n")/data/grastate.dat"
    start_node "$n" --wsrep-new-cluster
    echo "node$n"
    ;;
  transfers)  # how node N received the cluster's state at each join, in order: SST or IST
    # (the joiner's SST script runs at every join, and says which one the donor sent).
    sed -n 's/.*mariabackup \([IS]ST\) completed on joiner.*/\1/p' \
      "$(node_dir "${2:?node 1-3}")/error.log"
    ;;
  *)
    echo "usage: $0 start|stop|status|proxy|kill-node N|stop-node N|start-node N|positions|bootstrap [N]|transfers N" >&2
    exit 2
    ;;
esac
