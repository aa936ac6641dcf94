"""The database besides the ORM session, one concern a module:

- `batches`: typed reads (`Read[T]`: statements, their values and the decoder of their rows)
  sent several in one round trip where MySQL allows, on SQLAlchemy connections and inside the
  transactions SQLAlchemy opens and ends;
- `engines`: the two hot paths' engines — `reads`, AUTOCOMMIT, for the context read and a job's
  inputs; `writes` for the webhook;
- `pools`: what a pool does with a connection — the reset it gets back with (`prove_idle`) and
  an empty pool in a forked child;
- `conflicts`: a unit of work that lost a deadlock or a lock-wait timeout, run again; what
  counts as the database unavailable (gone, or not reachable) rather than the work failing;
- `request_end`: the ORM session's end of each app context, which a connection the server
  dropped after the last statement cannot turn into a 500.
"""
