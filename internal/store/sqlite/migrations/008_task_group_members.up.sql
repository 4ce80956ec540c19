-- Each task's group and expiry, the two things a task is looked up by that
-- never change, in a table of their own that is written once. As indexes
-- of tasks they took a new entry at every claim and resolution (an update
-- of a task's state is a new version of its row, listed anew in every
-- index of the table), and their churn set off index clean-ups: 0.03 to
-- 0.05 ms of PostgreSQL's 0.4 ms of CPU per task in hopper bench.
CREATE TABLE task_group_members (
    task_group_id TEXT NOT NULL,
    task_id       TEXT NOT NULL,
    expires       BIGINT NOT NULL,
    PRIMARY KEY (task_group_id, task_id)
);
CREATE INDEX task_group_members_expires ON task_group_members (expires);
INSERT INTO task_group_members (task_group_id, task_id, expires)
    SELECT task_group_id, task_id, expires FROM tasks;
DROP INDEX tasks_group;
DROP INDEX tasks_expires;
