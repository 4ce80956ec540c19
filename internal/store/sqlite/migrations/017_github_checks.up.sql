-- Check runs of the builds that report with `reporting: checks-v1`: one
-- row per run of a task (a new run gets a check run of its own, as a
-- completed check run cannot be reopened). state moves only forward
-- (queued, in_progress, completed), so a replica that read a task before
-- it resolved cannot put an older state over a newer one; check_run_id is
-- the forge's id once the check run was created (0 before), so later
-- states update it rather than create another.
CREATE TABLE github_checks (
    host          TEXT NOT NULL,
    task_id       TEXT NOT NULL,
    run_id        INTEGER NOT NULL,
    task_group_id TEXT NOT NULL,
    state         TEXT NOT NULL,
    check_run_id  BIGINT NOT NULL,
    PRIMARY KEY (host, task_id, run_id)
);
CREATE INDEX github_checks_group ON github_checks (task_group_id);
CREATE INDEX github_checks_check_run ON github_checks (host, check_run_id);
