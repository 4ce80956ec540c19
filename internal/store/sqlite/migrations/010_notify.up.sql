-- The Notify service. Times are milliseconds since the Unix epoch; JSON is
-- stored as text.

-- The outbox: one row per notification, written in the transaction of the
-- task transition that causes it (or of the API call that asks for it) and
-- sent from here by the sender duty. A claimed row's next_attempt is its
-- lease's end: a sender that dies mid-send leaves it due again then.
CREATE TABLE notify_outbox (
    id           TEXT PRIMARY KEY,
    channel      TEXT NOT NULL,
    target       TEXT NOT NULL,
    task_id      TEXT NOT NULL,   -- '' for a notification asked for through the API
    run_id       INTEGER NOT NULL,
    event        TEXT NOT NULL,   -- the queue event's kind ('' from the API)
    route        TEXT NOT NULL,
    status       TEXT,            -- the task status the event announced
    message      TEXT,            -- the message as asked for through the API
    dedup        TEXT,            -- a hash of an API request, for duplicates
    state        TEXT NOT NULL,
    attempts     INTEGER NOT NULL,
    next_attempt INTEGER NOT NULL,
    lease_owner  TEXT,
    reserved_at  INTEGER,         -- first claimed: what the rate limit counts
    error        TEXT NOT NULL,
    created      INTEGER NOT NULL,
    updated      INTEGER NOT NULL,
    expires      INTEGER NOT NULL
);
CREATE INDEX notify_outbox_due ON notify_outbox (next_attempt) WHERE state = 'pending';
CREATE INDEX notify_outbox_task ON notify_outbox (task_id, id);
CREATE INDEX notify_outbox_rate ON notify_outbox (channel, target, reserved_at) WHERE reserved_at IS NOT NULL;
CREATE INDEX notify_outbox_dedup ON notify_outbox (dedup, created) WHERE dedup IS NOT NULL;
CREATE INDEX notify_outbox_expires ON notify_outbox (expires);

-- Addresses no notification is sent to.
CREATE TABLE notify_denylist (
    notification_type    TEXT NOT NULL,
    notification_address TEXT NOT NULL,
    PRIMARY KEY (notification_type, notification_address)
);

-- One row per rate-limited address, locked while a sender decides how many
-- of its notifications may go out, so that replicas decide one at a time.
CREATE TABLE notify_rate_locks (
    channel TEXT NOT NULL,
    target  TEXT NOT NULL,
    PRIMARY KEY (channel, target)
);
