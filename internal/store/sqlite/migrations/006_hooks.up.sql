-- Hooks (the Hooks service). Definitions are JSON text; trigger_token is
-- sealed with the server key. next_scheduled is the due time the
-- scheduler waits for (0: no schedule); claimed_until is a short lease a
-- replica takes while it fires a due hook, so replicas do not race for it
-- (the fire stays idempotent through next_task_id if a lease runs out).
CREATE TABLE hooks (
    hook_group_id   TEXT NOT NULL,
    hook_id         TEXT NOT NULL,
    metadata        TEXT NOT NULL,
    task            TEXT NOT NULL,
    bindings        TEXT NOT NULL,
    schedule        TEXT NOT NULL,
    trigger_schema  TEXT NOT NULL,
    trigger_token   TEXT NOT NULL,
    next_task_id    TEXT NOT NULL,
    next_scheduled  BIGINT NOT NULL,
    claimed_until   BIGINT NOT NULL,
    created         BIGINT NOT NULL,
    last_modified   BIGINT NOT NULL,
    PRIMARY KEY (hook_group_id, hook_id)
);
CREATE INDEX hooks_due ON hooks (next_scheduled) WHERE next_scheduled > 0;

-- One row per fire of a hook, newest last.
CREATE TABLE hook_last_fires (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    hook_group_id    TEXT NOT NULL,
    hook_id          TEXT NOT NULL,
    fired_by         TEXT NOT NULL,
    task_id          TEXT NOT NULL,
    task_create_time BIGINT NOT NULL,
    result           TEXT NOT NULL,
    error            TEXT NOT NULL
);
CREATE INDEX hook_last_fires_hook ON hook_last_fires (hook_group_id, hook_id, id);
