-- The services' outbox (store/outbox.go): work one service owes because of
-- a change elsewhere, written in the transaction of that change and done
-- by the service's duty under a lease. (service, kind, msg_key) makes a
-- message one: queueing it again while it waits changes nothing but its
-- body, and while it is leased counts a new version (seq), so the holder's
-- finish leaves it due again. A leased message has lease_owner set and
-- next_attempt at its lease's end, so a killed holder's message is due
-- again when its lease runs out; attempts counts the claims, and a finish
-- or renewal must name the claim it holds.
CREATE TABLE outbox (
    service      TEXT NOT NULL,
    kind         TEXT NOT NULL,
    msg_key      TEXT NOT NULL,
    body         TEXT NOT NULL,
    seq          BIGINT NOT NULL,
    state        TEXT NOT NULL,
    attempts     INTEGER NOT NULL,
    next_attempt BIGINT NOT NULL,
    lease_owner  TEXT NOT NULL,
    last_error   TEXT NOT NULL,
    created      BIGINT NOT NULL,
    updated      BIGINT NOT NULL,
    expires      BIGINT NOT NULL,
    PRIMARY KEY (service, kind, msg_key)
);
CREATE INDEX outbox_due ON outbox (service, kind, next_attempt) WHERE state = 'pending';
CREATE INDEX outbox_expires ON outbox (service, expires);

-- The forge reporter learns of its builds' changes from here: every
-- build still pending when this runs is looked at once.
INSERT INTO outbox (service, kind, msg_key, body, seq, state, attempts, next_attempt, lease_owner, last_error, created, updated, expires)
    SELECT 'github', 'group', task_group_id, '', 1, 'pending', 0, 0, '', '', updated, updated, updated + 2592000000
    FROM github_builds WHERE state = 'pending';
