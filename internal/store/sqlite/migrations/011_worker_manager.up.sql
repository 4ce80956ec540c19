-- The Worker Manager service. Worker pools keep their provider's config as
-- JSON text; a worker's secrets (a static worker's staticSecret, the
-- reregistration secret) are kept only as SHA-256 hashes.
CREATE TABLE wm_worker_pools (
    worker_pool_id        TEXT NOT NULL PRIMARY KEY,
    provider_id           TEXT NOT NULL,
    previous_provider_ids TEXT NOT NULL,
    description           TEXT NOT NULL,
    config                TEXT NOT NULL,
    owner                 TEXT NOT NULL,
    email_on_error        BOOLEAN NOT NULL,
    created               BIGINT NOT NULL,
    last_modified         BIGINT NOT NULL
);

CREATE TABLE wm_workers (
    worker_pool_id     TEXT NOT NULL,
    worker_group       TEXT NOT NULL,
    worker_id          TEXT NOT NULL,
    provider_id        TEXT NOT NULL,
    state              TEXT NOT NULL,
    capacity           INTEGER NOT NULL,
    launch_config_id   TEXT NOT NULL,
    created            BIGINT NOT NULL,
    expires            BIGINT NOT NULL,
    last_modified      BIGINT NOT NULL,
    last_checked       BIGINT NOT NULL,
    static_secret_hash TEXT NOT NULL,
    secret_hash        TEXT NOT NULL,
    registered_at      BIGINT NOT NULL,
    terminate_after    BIGINT NOT NULL,
    provider_data      TEXT NOT NULL,
    PRIMARY KEY (worker_pool_id, worker_group, worker_id)
);
CREATE INDEX wm_workers_state ON wm_workers (worker_pool_id, state);

CREATE TABLE wm_errors (
    error_id         TEXT NOT NULL PRIMARY KEY,
    worker_pool_id   TEXT NOT NULL,
    reported         BIGINT NOT NULL,
    kind             TEXT NOT NULL,
    title            TEXT NOT NULL,
    description      TEXT NOT NULL,
    extra            TEXT NOT NULL,
    launch_config_id TEXT NOT NULL
);
CREATE INDEX wm_errors_pool ON wm_errors (worker_pool_id, reported);
CREATE INDEX wm_errors_reported ON wm_errors (reported);

-- Leases of duties that must run on one replica at a time (the
-- provisioner): a holder keeps its lease by renewing it before it runs
-- out; a replica that dies loses it when it runs out.
CREATE TABLE wm_leases (
    name   TEXT NOT NULL PRIMARY KEY,
    holder TEXT NOT NULL,
    until  BIGINT NOT NULL
);
