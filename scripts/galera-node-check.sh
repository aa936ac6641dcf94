#!/bin/sh
# HAProxy's health check of one Galera node (scripts/galera-cluster.sh): up only while the node
# is Synced (wsrep_local_state 4), or donating a full copy by a method that does not block it
# (mariabackup: state 2, Donor/Desynced, with wsrep_desync OFF). A node that accepts
# connections but is joining, or was desynced by an operator (a backup, wsrep_desync ON),
# answers with old data or refuses queries, so it takes no new connections.
# HAProxy calls it as: <proxy address> <proxy port> <server address> <server port>; the check
# user's credentials are in the option file GALERA_CHECK_CNF.
answer=$(mariadb --defaults-extra-file="${GALERA_CHECK_CNF:?}" --protocol=tcp -h "$3" -P "$4" \
  --connect-timeout=1 -N -B -e "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS
    WHERE VARIABLE_NAME = 'wsrep_local_state';
  SELECT @@wsrep_desync, @@wsrep_sst_method" 2>/dev/null | tr '\n\t' '  ')
case "$answer" in
  "4 "*) exit 0 ;;
  "2 0 mariabackup "*) exit 0 ;;
  *) exit 1 ;;
esac
