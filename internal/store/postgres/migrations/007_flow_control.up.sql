-- Flow control (README "Flow control"). A task under a key's policy has
-- flow_key set; flow_keys holds each key's policy and counts of its
-- pending and running tasks, kept by the trigger below in the transaction
-- that changes a task's state, so claims read them without counting rows.
ALTER TABLE tasks ADD COLUMN flow_key TEXT;
ALTER TABLE task_groups ADD COLUMN fail_fast BIGINT NOT NULL DEFAULT 0;

CREATE TABLE flow_keys (
    task_queue_id     TEXT NOT NULL,
    flow_key          TEXT NOT NULL,
    lim               INTEGER NOT NULL, -- 0: no limit
    supersede         BIGINT NOT NULL,
    cancel_in_progress BIGINT NOT NULL,
    pending           INTEGER NOT NULL DEFAULT 0,
    running           INTEGER NOT NULL DEFAULT 0,
    last_claimed      BIGINT NOT NULL DEFAULT 0,
    superseded        BIGINT NOT NULL DEFAULT 0,
    canceled          BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (task_queue_id, flow_key)
);
-- The keys a claim may take a task from, least recently claimed first.
CREATE INDEX flow_keys_ready ON flow_keys (task_queue_id, last_claimed)
    WHERE pending > 0 AND (lim = 0 OR running < lim);

-- Claims of tasks without a key read this index only, so a backlog of keyed
-- tasks held back by their limit costs them nothing; keyed tasks are found
-- through their key (the two indexes after it).
DROP INDEX tasks_pending;
CREATE INDEX tasks_pending ON tasks (task_queue_id, priority DESC, pending_seq)
    WHERE pending_seq IS NOT NULL AND flow_key IS NULL;
CREATE INDEX tasks_flow_pending ON tasks (task_queue_id, flow_key, priority DESC, pending_seq)
    WHERE pending_seq IS NOT NULL AND flow_key IS NOT NULL;
CREATE INDEX tasks_flow_newest ON tasks (task_queue_id, flow_key, pending_seq)
    WHERE pending_seq IS NOT NULL AND flow_key IS NOT NULL;
CREATE INDEX tasks_flow_running ON tasks (task_queue_id, flow_key)
    WHERE state = 'running' AND flow_key IS NOT NULL;

CREATE FUNCTION hopper_flow_count() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        UPDATE flow_keys SET
            pending = pending + (NEW.state = 'pending')::int,
            running = running + (NEW.state = 'running')::int
        WHERE task_queue_id = NEW.task_queue_id AND flow_key = NEW.flow_key;
    ELSE
        UPDATE flow_keys SET
            pending = pending + (NEW.state = 'pending')::int - (OLD.state = 'pending')::int,
            running = running + (NEW.state = 'running')::int - (OLD.state = 'running')::int
        WHERE task_queue_id = NEW.task_queue_id AND flow_key = NEW.flow_key;
    END IF;
    RETURN NULL;
END
$$;
-- The WHEN clauses are checked without calling the function: tasks without
-- a key pay nothing.
CREATE TRIGGER tasks_flow_insert AFTER INSERT ON tasks FOR EACH ROW
    WHEN (NEW.flow_key IS NOT NULL) EXECUTE FUNCTION hopper_flow_count();
CREATE TRIGGER tasks_flow_update AFTER UPDATE OF state ON tasks FOR EACH ROW
    WHEN (NEW.flow_key IS NOT NULL AND OLD.state IS DISTINCT FROM NEW.state) EXECUTE FUNCTION hopper_flow_count();
