-- Flow control (README "Flow control"); see the PostgreSQL migration of the
-- same number for why each piece exists.
ALTER TABLE tasks ADD COLUMN flow_key TEXT;
ALTER TABLE task_groups ADD COLUMN fail_fast BIGINT NOT NULL DEFAULT 0;

CREATE TABLE flow_keys (
    task_queue_id     TEXT NOT NULL,
    flow_key          TEXT NOT NULL,
    lim               INTEGER NOT NULL,
    supersede         BIGINT NOT NULL,
    cancel_in_progress BIGINT NOT NULL,
    pending           INTEGER NOT NULL DEFAULT 0,
    running           INTEGER NOT NULL DEFAULT 0,
    last_claimed      BIGINT NOT NULL DEFAULT 0,
    superseded        BIGINT NOT NULL DEFAULT 0,
    canceled          BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (task_queue_id, flow_key)
);
CREATE INDEX flow_keys_ready ON flow_keys (task_queue_id, last_claimed)
    WHERE pending > 0 AND (lim = 0 OR running < lim);

DROP INDEX tasks_pending;
CREATE INDEX tasks_pending ON tasks (task_queue_id, priority DESC, pending_seq)
    WHERE pending_seq IS NOT NULL AND flow_key IS NULL;
CREATE INDEX tasks_flow_pending ON tasks (task_queue_id, flow_key, priority DESC, pending_seq)
    WHERE pending_seq IS NOT NULL AND flow_key IS NOT NULL;
CREATE INDEX tasks_flow_newest ON tasks (task_queue_id, flow_key, pending_seq)
    WHERE pending_seq IS NOT NULL AND flow_key IS NOT NULL;
CREATE INDEX tasks_flow_running ON tasks (task_queue_id, flow_key)
    WHERE state = 'running' AND flow_key IS NOT NULL;

CREATE TRIGGER tasks_flow_insert AFTER INSERT ON tasks
WHEN NEW.flow_key IS NOT NULL
BEGIN
    UPDATE flow_keys SET
        pending = pending + (NEW.state = 'pending'),
        running = running + (NEW.state = 'running')
    WHERE task_queue_id = NEW.task_queue_id AND flow_key = NEW.flow_key;
END;

CREATE TRIGGER tasks_flow_update AFTER UPDATE OF state ON tasks
WHEN NEW.flow_key IS NOT NULL AND OLD.state <> NEW.state
BEGIN
    UPDATE flow_keys SET
        pending = pending + (NEW.state = 'pending') - (OLD.state = 'pending'),
        running = running + (NEW.state = 'running') - (OLD.state = 'running')
    WHERE task_queue_id = NEW.task_queue_id AND flow_key = NEW.flow_key;
END;
