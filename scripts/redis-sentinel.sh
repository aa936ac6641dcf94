#!/usr/bin/env bash
# A Redis primary, one replica and three Sentinels on loopback, for tests and trials; nothing
# shared with the machine's own Redis (own ports, own directory).
#
#   scripts/redis-sentinel.sh start|stop|status|kill-master|failover
#
# REDIS_HA_DIR   state directory           (default /tmp/memory-redis-ha)
# REDIS_HA_PORT  primary's port; replica +1 (default 6390)
# REDIS_HA_SENTINEL_PORT first Sentinel; +1, +2 (default 26390)
# REDIS_HA_MASTER the master's name         (default mymaster)
#
# `start` prints the service's settings: REDIS_SENTINELS=… REDIS_SENTINEL_MASTER=… and
# REDIS_URL=redis://:<password>@sentinel/0 (the password the script made for this set, kept in
# REDIS_HA_DIR/secrets.env, owner-only; the service takes only the password and db from it).
#
# Choices, each a production one (docs/operations-galera.md, "Redis behind Sentinel"):
# - a password on every Redis (requirepass), which replicas and Sentinels present (masterauth,
#   auth-pass);
# - AOF, fsync every second: a restarted Redis (the old master coming back as a replica, or all
#   of them after a power cut) starts from its own data, losing at most a second, instead of
#   empty (a master restarted empty and not yet demoted would hand its emptiness to replicas);
# - min-replicas-to-write 0 here: with one replica, 1 would refuse every write from a failover
#   until a replica returns. Writes that must not be lost are confirmed one by one instead
#   (`WAIT`, app/redis_connection.py). With two replicas or more, production sets
#   REDIS_HA_MIN_REPLICAS=1 with min-replicas-max-lag 10: a master cut off from its replicas
#   (and from the Sentinels, which promote another) stops taking writes after 10 s instead of
#   taking writes that the promotion throws away.
set -euo pipefail

DIR="${REDIS_HA_DIR:-/tmp/memory-redis-ha}"
PORT="${REDIS_HA_PORT:-6390}"
SPORT="${REDIS_HA_SENTINEL_PORT:-26390}"
MASTER="${REDIS_HA_MASTER:-mymaster}"
HOST=127.0.0.1
# Sentinel declares the master down after this long without an answer: short, so a test's
# failover takes seconds, but not so short that a machine busy with other work fails over a
# master that was only slow to answer (1 s did, under a load average of 20).
DOWN_AFTER_MS="${REDIS_HA_DOWN_AFTER_MS:-3000}"
MIN_REPLICAS="${REDIS_HA_MIN_REPLICAS:-0}"

password() { sed -n 's/^REDIS_PASSWORD=//p' "$DIR/secrets.env"; }
cli() { redis-cli -h "$HOST" -a "$(password)" --no-auth-warning "$@"; }

redis_ports() { echo "$PORT $((PORT + 1))"; }
sentinel_ports() { echo "$SPORT $((SPORT + 1)) $((SPORT + 2))"; }

wait_ping() {  # port [cli]: Redis (with its password) or a Sentinel (redis-cli)
  for _ in $(seq 100); do
    [ "$(${2:-cli} -p "$1" ping 2>/dev/null)" = PONG ] && return 0
    sleep 0.1
  done
  echo "redis on port $1 did not start" >&2
  return 1
}

start_redis() {  # port [replicaof-port]
  local port=$1 conf="$DIR/redis-$1.conf"
  mkdir -p "$DIR/data-$port"
  {
    echo "port $port"
    echo "bind $HOST"
    echo "dir $DIR/data-$port"
    echo "daemonize yes"
    echo "pidfile $DIR/redis-$port.pid"
    echo "logfile $DIR/redis-$port.log"
    echo "save \"\""
    echo "appendonly yes"
    echo "appendfsync everysec"
    echo "requirepass $(password)"
    echo "masterauth $(password)"
    echo "min-replicas-to-write $MIN_REPLICAS"
    echo "min-replicas-max-lag 10"
    # A replica promoted by Sentinel announces the address clients can reach.
    echo "replica-announce-ip $HOST"
    [ -n "${2:-}" ] && echo "replicaof $HOST $2"
  } >"$conf"
  chmod 600 "$conf"
  redis-server "$conf"
  wait_ping "$port"
}

start_sentinel() {
  local port=$1 conf="$DIR/sentinel-$1.conf"
  # Sentinel rewrites its own file (the current master, the known replicas and Sentinels).
  cat >"$conf" <<CONF
port $port
bind $HOST
daemonize yes
pidfile $DIR/sentinel-$port.pid
logfile $DIR/sentinel-$port.log
dir $DIR
sentinel announce-ip $HOST
sentinel monitor $MASTER $HOST $PORT 2
sentinel auth-pass $MASTER $(password)
sentinel down-after-milliseconds $MASTER $DOWN_AFTER_MS
sentinel failover-timeout $MASTER 10000
sentinel parallel-syncs $MASTER 1
CONF
  chmod 600 "$conf"
  redis-server "$conf" --sentinel
  wait_ping "$port" redis-cli
}

stop_pidfile() {
  local pidfile=$1
  [ -f "$pidfile" ] || return 0
  local pid
  pid=$(cat "$pidfile")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$pidfile"
}

master_port() {
  redis-cli -h "$HOST" -p "$SPORT" sentinel get-master-addr-by-name "$MASTER" | sed -n 2p
}

case "${1:-}" in
  start)
    mkdir -p "$DIR"
    (umask 077; echo "REDIS_PASSWORD=$(openssl rand -hex 16)" >"$DIR/secrets.env")
    start_redis "$PORT"
    start_redis "$((PORT + 1))" "$PORT"
    for port in $(sentinel_ports); do start_sentinel "$port"; done
    # Ready when every Sentinel knows the replica and the other two Sentinels: a failover
    # before that would find nobody to promote or no quorum.
    for _ in $(seq 150); do
      ready=1
      for port in $(sentinel_ports); do
        info=$(redis-cli -h "$HOST" -p "$port" sentinel master "$MASTER" 2>/dev/null | tr '\n' ' ')
        [[ "$info" =~ num-slaves\ 1\  && "$info" =~ num-other-sentinels\ 2\  ]] || ready=0
      done
      [ "$ready" = 1 ] && break
      sleep 0.2
    done
    [ "$ready" = 1 ] || { echo "sentinels did not see the replica and each other" >&2; exit 1; }
    echo "REDIS_SENTINELS=$(sentinel_ports | sed "s/\([0-9]*\)/$HOST:\1/g; s/ /,/g")"
    echo "REDIS_SENTINEL_MASTER=$MASTER"
    echo "REDIS_URL=redis://:$(password)@sentinel/0"
    ;;
  stop)
    for port in $(sentinel_ports); do stop_pidfile "$DIR/sentinel-$port.pid"; done
    for port in $(redis_ports); do stop_pidfile "$DIR/redis-$port.pid"; done
    rm -rf "$DIR"
    ;;
  status)
    echo "master: $(master_port)"
    for port in $(redis_ports); do
      echo "$port: $(cli -p "$port" role 2>/dev/null | head -1 || echo down)"
    done
    ;;
  kill-master)
    # The loss of the master's host: SIGKILL, no goodbye to replicas or clients.
    port=$(master_port)
    kill -9 "$(cat "$DIR/redis-$port.pid")"
    rm -f "$DIR/redis-$port.pid"
    echo "$port"
    ;;
  restart-old-master)
    # The killed master comes back; Sentinel makes it a replica of the new one.
    port="${2:?port}"
    other=$([ "$port" = "$PORT" ] && echo $((PORT + 1)) || echo "$PORT")
    start_redis "$port" "$other"
    ;;
  failover)
    redis-cli -h "$HOST" -p "$SPORT" sentinel failover "$MASTER"
    ;;
  *)
    echo "usage: $0 start|stop|status|kill-master|restart-old-master PORT|failover" >&2
    exit 2
    ;;
esac
