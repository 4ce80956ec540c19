-- Operators' history (issue 29): past tasks found by state, queue, group,
-- name and creation time, and the audit log of client and role changes.
--
-- What never changes about a task (its creation time, queue and name) goes
-- beside its group in task_group_members, written once when the task is
-- created, so its indexes cost nothing at the task's later transitions.
ALTER TABLE task_group_members ADD COLUMN created BIGINT;
ALTER TABLE task_group_members ADD COLUMN task_queue_id TEXT;
ALTER TABLE task_group_members ADD COLUMN name TEXT;
UPDATE task_group_members m SET
    created = (extract(epoch FROM (t.definition::jsonb ->> 'created')::timestamptz) * 1000)::bigint,
    task_queue_id = t.task_queue_id,
    name = coalesce(t.definition::jsonb -> 'metadata' ->> 'name', '')
    FROM tasks t WHERE t.task_id = m.task_id;
CREATE INDEX task_group_members_created ON task_group_members (created, task_id);
CREATE INDEX task_group_members_queue_created ON task_group_members (task_queue_id, created, task_id);

-- A task's state changes, so finding tasks by state needs indexes of
-- tasks: by state, and by queue and state. They list resolved rows only:
-- a task is written resolved about once, while its unresolved versions
-- (pending, running) are many and already listed by the partial indexes of
-- pending and unresolved tasks.
ALTER TABLE tasks ADD COLUMN created BIGINT;
UPDATE tasks SET created = (extract(epoch FROM (definition::jsonb ->> 'created')::timestamptz) * 1000)::bigint;
CREATE INDEX tasks_resolved_created ON tasks (state, created, task_id) WHERE unresolved = 0;
CREATE INDEX tasks_resolved_queue_created ON tasks (task_queue_id, state, created, task_id) WHERE unresolved = 0;

-- Who changed which client or role, and when (Taskcluster's
-- auth.listAuditHistory and auth.getEntityHistory), written in the
-- transaction of the change.
CREATE TABLE audit_history (
    id          BIGSERIAL PRIMARY KEY,
    entity_type TEXT NOT NULL,
    entity_id   TEXT NOT NULL,
    client_id   TEXT NOT NULL,
    action_type TEXT NOT NULL,
    created     BIGINT NOT NULL
);
CREATE INDEX audit_history_entity ON audit_history (entity_type, entity_id, created, id);
CREATE INDEX audit_history_client ON audit_history (client_id, created, id);
CREATE INDEX audit_history_created ON audit_history (created);
