-- A notification's sending is claimed through the services' outbox (023)
-- as a message of service 'notify', kind 'send', keyed by its id, queued
-- with it: notify_outbox keeps what the notification is, its state,
-- attempts and error, and reserved_at (what the rate limit counts), but
-- its own lease (lease_owner) and schedule (next_attempt) are gone. A
-- notification still pending keeps its place: due when it was, or, if a
-- sender held it when the upgrade stopped it, when that lease would have
-- ended (a leased row's next_attempt was its lease's end). One no longer
-- pending gets no message.
INSERT INTO outbox (service, kind, msg_key, body, seq, state, attempts, next_attempt, lease_owner, last_error, created, updated, expires)
    SELECT 'notify', 'send', id, '', 1, 'pending', attempts, next_attempt, '', error, created, updated, expires
    FROM notify_outbox WHERE state = 'pending';
DROP INDEX notify_outbox_due;
ALTER TABLE notify_outbox DROP COLUMN next_attempt;
ALTER TABLE notify_outbox DROP COLUMN lease_owner;

-- Of the messages due at one time, the oldest key goes first (a
-- notification's id is time-ordered, and those queued due at once are all
-- due at 0): the claim's order, read from the index.
DROP INDEX outbox_due;
CREATE INDEX outbox_due ON outbox (service, kind, next_attempt, msg_key) WHERE state = 'pending';
