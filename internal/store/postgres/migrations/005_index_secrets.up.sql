-- The Index and Secrets services. Times are milliseconds since the Unix
-- epoch; JSON is stored as text. Keys sort bytewise (COLLATE "C"), as on
-- SQLite, so listings page the same way on both drivers.

-- One row per namespace that holds entries somewhere below it: name within
-- parent ("" is the root), listed until expires.
CREATE TABLE index_namespaces (
    parent  TEXT COLLATE "C" NOT NULL,
    name    TEXT COLLATE "C" NOT NULL,
    expires BIGINT NOT NULL,
    PRIMARY KEY (parent, name)
);
CREATE INDEX index_namespaces_expires ON index_namespaces (expires);

-- One row per index path: the task found at namespace.name.
CREATE TABLE index_tasks (
    namespace TEXT COLLATE "C" NOT NULL,
    name      TEXT COLLATE "C" NOT NULL,
    rank      DOUBLE PRECISION NOT NULL,
    task_id   TEXT NOT NULL,
    data      TEXT NOT NULL,
    expires   BIGINT NOT NULL,
    PRIMARY KEY (namespace, name)
);
CREATE INDEX index_tasks_expires ON index_tasks (expires);
CREATE INDEX index_tasks_task ON index_tasks (task_id);

-- Secret values, sealed with the server key.
CREATE TABLE secrets (
    name    TEXT COLLATE "C" PRIMARY KEY,
    sealed  TEXT NOT NULL,
    expires BIGINT NOT NULL
);
CREATE INDEX secrets_expires ON secrets (expires);
