-- A worker's previous reregistration secret (issue 34): the secret the
-- worker presented to get its current one, accepted again until the
-- current one is first used, so that a worker whose reregisterWorker
-- answer was lost (a replica killed after the commit) can ask again. Kept
-- as a SHA-256 hash, as the current one.
ALTER TABLE wm_workers ADD COLUMN previous_secret_hash TEXT NOT NULL DEFAULT '';
