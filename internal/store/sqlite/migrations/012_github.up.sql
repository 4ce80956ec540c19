-- The forge integration (the github service). A webhook delivery is
-- stored before it is acknowledged (github_deliveries, keyed by the
-- forge's delivery id so a redelivery is stored once) and processed from
-- here under a short lease (claimed_until), so a replica killed mid-way
-- loses nothing: the lease runs out and another takes it again.
CREATE TABLE github_deliveries (
    host          TEXT NOT NULL,
    delivery_id   TEXT NOT NULL,
    forge         TEXT NOT NULL,
    event         TEXT NOT NULL,
    body          TEXT NOT NULL,
    received      BIGINT NOT NULL,
    state         TEXT NOT NULL,
    attempts      INTEGER NOT NULL,
    next_attempt  BIGINT NOT NULL,
    claimed_until BIGINT NOT NULL,
    outcome       TEXT NOT NULL,
    error         TEXT NOT NULL,
    PRIMARY KEY (host, delivery_id)
);
CREATE INDEX github_deliveries_due ON github_deliveries (next_attempt) WHERE state = 'pending';

-- One row per task group an event created (every group, not only the
-- first); seq orders the listing newest first.
CREATE TABLE github_builds (
    seq                 INTEGER PRIMARY KEY AUTOINCREMENT,
    task_group_id       TEXT NOT NULL UNIQUE,
    host                TEXT NOT NULL,
    organization        TEXT NOT NULL,
    repository          TEXT NOT NULL,
    sha                 TEXT NOT NULL,
    state               TEXT NOT NULL,
    event_type          TEXT NOT NULL,
    event_id            TEXT NOT NULL,
    installation_id     BIGINT NOT NULL,
    pull_request_number INTEGER NOT NULL,
    reporting           TEXT NOT NULL,
    created             BIGINT NOT NULL,
    updated             BIGINT NOT NULL
);
CREATE INDEX github_builds_repo ON github_builds (organization, repository, seq);
CREATE INDEX github_builds_state ON github_builds (state, seq);

-- Statuses, comments and reactions to send to a forge, written in the
-- transaction of the change that causes them and sent by a duty with
-- retries. outbox_key makes a message one: a build's status is replaced
-- by its newer state (seq counts the versions), an exact duplicate
-- comment is not queued again.
CREATE TABLE github_outbox (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    host            TEXT NOT NULL,
    outbox_key      TEXT NOT NULL,
    kind            TEXT NOT NULL,
    owner           TEXT NOT NULL,
    repo            TEXT NOT NULL,
    target          TEXT NOT NULL,
    installation_id BIGINT NOT NULL,
    body            TEXT NOT NULL,
    seq             BIGINT NOT NULL,
    state           TEXT NOT NULL,
    attempts        INTEGER NOT NULL,
    next_attempt    BIGINT NOT NULL,
    claimed_until   BIGINT NOT NULL,
    last_error      TEXT NOT NULL,
    created         BIGINT NOT NULL,
    UNIQUE (host, outbox_key)
);
CREATE INDEX github_outbox_due ON github_outbox (next_attempt) WHERE state = 'pending';

-- Where the GitHub App is installed, per owner.
CREATE TABLE github_installations (
    host            TEXT NOT NULL,
    owner           TEXT NOT NULL,
    installation_id BIGINT NOT NULL,
    PRIMARY KEY (host, owner)
);
