-- Where a long-lived connection is held when replicas share the database
-- (issue 39): a worker's websocktunnel session ("wst/<tunnelId>") or its
-- interactive agent ("shell/<taskId>/<runId>") is held by the replica it
-- connected to; a viewer on another replica finds it here. The holder
-- renews its rows; a replica that died leaves rows that run out.
CREATE TABLE replica_endpoints (
    endpoint_key TEXT PRIMARY KEY,
    replica_url  TEXT NOT NULL,
    expires      INTEGER NOT NULL
);
CREATE INDEX replica_endpoints_expires ON replica_endpoints (expires);
