-- A stored delivery's processing is claimed through the services' outbox
-- (023) as a message of service 'github', kind 'delivery', keyed by host
-- and delivery id, queued when the delivery is stored: the table's own
-- lease (claimed_until) and schedule (next_attempt) are gone; attempts
-- stays, the count people are shown. A delivery still pending keeps its
-- place: due when it was, or, if a replica held it when the upgrade
-- stopped it, when that lease would have ended.
INSERT INTO outbox (service, kind, msg_key, body, seq, state, attempts, next_attempt, lease_owner, last_error, created, updated, expires)
    SELECT 'github', 'delivery', host || ' ' || delivery_id, '', 1, 'pending', attempts,
        CASE WHEN claimed_until > next_attempt THEN claimed_until ELSE next_attempt END,
        '', error, received, received, received + 2592000000
    FROM github_deliveries WHERE state = 'pending';
DROP INDEX github_deliveries_due;
ALTER TABLE github_deliveries DROP COLUMN next_attempt;
ALTER TABLE github_deliveries DROP COLUMN claimed_until;
