-- The Index and Secrets services. Times are milliseconds since the Unix
-- epoch; JSON is stored as text.

-- One row per namespace that holds entries somewhere below it: name within
-- parent ("" is the root), listed until expires.
CREATE TABLE index_namespaces (
    parent  TEXT NOT NULL,
    name    TEXT NOT NULL,
    expires INTEGER NOT NULL,
    PRIMARY KEY (parent, name)
);
CREATE INDEX index_namespaces_expires ON index_namespaces (expires);

-- One row per index path: the task found at namespace.name.
CREATE TABLE index_tasks (
    namespace TEXT NOT NULL,
    name      TEXT NOT NULL,
    rank      REAL NOT NULL,
    task_id   TEXT NOT NULL,
    data      TEXT NOT NULL,
    expires   INTEGER NOT NULL,
    PRIMARY KEY (namespace, name)
);
CREATE INDEX index_tasks_expires ON index_tasks (expires);
CREATE INDEX index_tasks_task ON index_tasks (task_id);

-- Secret values, sealed with the server key.
CREATE TABLE secrets (
    name    TEXT PRIMARY KEY,
    sealed  TEXT NOT NULL,
    expires INTEGER NOT NULL
);
CREATE INDEX secrets_expires ON secrets (expires);
