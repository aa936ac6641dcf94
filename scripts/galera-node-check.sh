#!/bin/sh
# HAProxy's health check of one Galera node (scripts/galera-cluster.sh): up only while the node
# is Synced (wsrep_local_state 4). A node that accepts connections but is joining, donating or
# desynced (a backup) answers with old data or refuses queries, so it takes no new connections.
# HAProxy calls it as: <proxy address> <proxy port> <server address> <server port>.
state=$(mariadb --protocol=tcp -h "$3" -P "$4" -u haproxy --connect-timeout=1 -N -B \
  -e "SHOW GLOBAL STATUS LIKE 'wsrep_local_state'" 2>/dev/null | cut -f2)
[ "$state" = 4 ]
