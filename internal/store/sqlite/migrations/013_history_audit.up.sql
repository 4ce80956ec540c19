-- Operators' history and the audit log; see the PostgreSQL migration of
-- the same number for why each piece exists.
ALTER TABLE task_group_members ADD COLUMN created BIGINT;
ALTER TABLE task_group_members ADD COLUMN task_queue_id TEXT;
ALTER TABLE task_group_members ADD COLUMN name TEXT;
UPDATE task_group_members SET
    created = (SELECT CAST(round((julianday(json_extract(t.definition, '$.created')) - 2440587.5) * 86400000) AS INTEGER)
        FROM tasks t WHERE t.task_id = task_group_members.task_id),
    task_queue_id = (SELECT t.task_queue_id FROM tasks t WHERE t.task_id = task_group_members.task_id),
    name = (SELECT coalesce(json_extract(t.definition, '$.metadata.name'), '') FROM tasks t WHERE t.task_id = task_group_members.task_id);
CREATE INDEX task_group_members_created ON task_group_members (created, task_id);
CREATE INDEX task_group_members_queue_created ON task_group_members (task_queue_id, created, task_id);

ALTER TABLE tasks ADD COLUMN created BIGINT;
UPDATE tasks SET created = CAST(round((julianday(json_extract(definition, '$.created')) - 2440587.5) * 86400000) AS INTEGER);
CREATE INDEX tasks_resolved_created ON tasks (state, created, task_id) WHERE unresolved = 0;
CREATE INDEX tasks_resolved_queue_created ON tasks (task_queue_id, state, created, task_id) WHERE unresolved = 0;

CREATE TABLE audit_history (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    entity_type TEXT NOT NULL,
    entity_id   TEXT NOT NULL,
    client_id   TEXT NOT NULL,
    action_type TEXT NOT NULL,
    created     BIGINT NOT NULL
);
CREATE INDEX audit_history_entity ON audit_history (entity_type, entity_id, created, id);
CREATE INDEX audit_history_client ON audit_history (client_id, created, id);
CREATE INDEX audit_history_created ON audit_history (created);
