-- Times are milliseconds since the Unix epoch; JSON is stored as text.
CREATE TABLE tasks (
    task_id        TEXT PRIMARY KEY,
    task_queue_id  TEXT NOT NULL,
    scheduler_id   TEXT NOT NULL,
    project_id     TEXT NOT NULL,
    task_group_id  TEXT NOT NULL,
    requires       TEXT NOT NULL,
    priority       INTEGER NOT NULL,
    deadline       INTEGER NOT NULL,
    expires        INTEGER NOT NULL,
    definition     TEXT NOT NULL,
    retries_left   INTEGER NOT NULL,
    runs           TEXT NOT NULL,
    state          TEXT NOT NULL,
    unresolved     INTEGER NOT NULL,
    taken_until    INTEGER,
    claimed_at     INTEGER,
    pending_seq    INTEGER,
    pending_since  INTEGER
);
CREATE INDEX tasks_pending ON tasks (task_queue_id, priority DESC, pending_seq) WHERE pending_seq IS NOT NULL;
CREATE INDEX tasks_pending_seq ON tasks (pending_seq) WHERE pending_seq IS NOT NULL;
CREATE INDEX tasks_pending_since ON tasks (task_queue_id, pending_since, task_id) WHERE pending_seq IS NOT NULL;
CREATE INDEX tasks_taken_until ON tasks (taken_until) WHERE taken_until IS NOT NULL;
CREATE INDEX tasks_running ON tasks (task_queue_id, claimed_at, task_id) WHERE state = 'running';
CREATE INDEX tasks_unresolved_deadline ON tasks (deadline) WHERE unresolved = 1;
CREATE INDEX tasks_group ON tasks (task_group_id, task_id);
CREATE INDEX tasks_group_unresolved ON tasks (task_group_id) WHERE unresolved = 1;
CREATE INDEX tasks_expires ON tasks (expires);

CREATE TABLE task_dependencies (
    required_task_id  TEXT NOT NULL,
    dependent_task_id TEXT NOT NULL,
    requires          TEXT NOT NULL,
    satisfied         INTEGER NOT NULL,
    expires           INTEGER NOT NULL,
    PRIMARY KEY (required_task_id, dependent_task_id)
);
CREATE INDEX task_dependencies_unsatisfied ON task_dependencies (dependent_task_id) WHERE satisfied = 0;
CREATE INDEX task_dependencies_expires ON task_dependencies (expires);

CREATE TABLE task_groups (
    task_group_id TEXT PRIMARY KEY,
    scheduler_id  TEXT NOT NULL,
    expires       INTEGER NOT NULL,
    sealed        INTEGER
);

CREATE TABLE task_queues (
    task_queue_id    TEXT PRIMARY KEY,
    description      TEXT NOT NULL,
    stability        TEXT NOT NULL,
    expires          INTEGER NOT NULL,
    last_date_active INTEGER NOT NULL
);

CREATE TABLE workers (
    task_queue_id      TEXT NOT NULL,
    worker_group       TEXT NOT NULL,
    worker_id          TEXT NOT NULL,
    first_claim        INTEGER NOT NULL,
    last_date_active   INTEGER NOT NULL,
    expires            INTEGER NOT NULL,
    quarantine_until   INTEGER NOT NULL,
    quarantine_details TEXT NOT NULL,
    recent_tasks       TEXT NOT NULL,
    PRIMARY KEY (task_queue_id, worker_group, worker_id)
);

CREATE TABLE artifacts (
    task_id      TEXT NOT NULL,
    run_id       INTEGER NOT NULL,
    name         TEXT NOT NULL,
    storage_type TEXT NOT NULL,
    content_type TEXT NOT NULL,
    details      TEXT NOT NULL,
    expires      INTEGER NOT NULL,
    present      INTEGER NOT NULL,
    PRIMARY KEY (task_id, run_id, name)
);
CREATE INDEX artifacts_expires ON artifacts (expires);

CREATE TABLE clients (
    client_id            TEXT PRIMARY KEY,
    description          TEXT NOT NULL,
    access_token         TEXT NOT NULL,
    scopes               TEXT NOT NULL,
    created              INTEGER NOT NULL,
    last_modified        INTEGER NOT NULL,
    last_date_used       INTEGER NOT NULL,
    last_rotated         INTEGER NOT NULL,
    expires              INTEGER NOT NULL,
    disabled             INTEGER NOT NULL,
    delete_on_expiration INTEGER NOT NULL
);

CREATE TABLE roles (
    role_id       TEXT PRIMARY KEY,
    scopes        TEXT NOT NULL,
    description   TEXT NOT NULL,
    created       INTEGER NOT NULL,
    last_modified INTEGER NOT NULL
);

CREATE TABLE meta (
    name  TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
INSERT INTO meta (name, value) VALUES ('roles_version', 1);
