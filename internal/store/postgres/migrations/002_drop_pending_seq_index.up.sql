-- Nothing on PostgreSQL looks pending runs up by pending_seq alone (the
-- sequence numbers them; SQLite keeps the index to find the maximum), and
-- every task inserted or made pending paid for an entry in it.
DROP INDEX IF EXISTS tasks_pending_seq;
