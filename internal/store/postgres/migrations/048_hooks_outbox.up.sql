-- A hook's scheduled fires are claimed through the services' outbox (023):
-- a hook with a schedule has one message of service 'hooks', kind 'fire',
-- keyed by hookGroupId/hookId, due at its next due time. claimed_until
-- stays: the end of the hook's last claim, which the schedule's rule
-- reads. A hook a replica held when the upgrade stopped it is due when
-- that lease would have ended, as another replica would have found it.
INSERT INTO outbox (service, kind, msg_key, body, seq, state, attempts, next_attempt, lease_owner, last_error, created, updated, expires)
    SELECT 'hooks', 'fire', hook_group_id || '/' || hook_id, '', 1, 'pending', 0,
        CASE WHEN claimed_until > next_scheduled THEN claimed_until ELSE next_scheduled END,
        '', '', last_modified, last_modified, next_scheduled + 31536000000
    FROM hooks WHERE next_scheduled > 0;
DROP INDEX hooks_due;
