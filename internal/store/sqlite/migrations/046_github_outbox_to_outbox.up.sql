-- The forge's statuses, comments, reactions and check runs move into the
-- services' outbox (023) as messages of service 'github', kind 'send',
-- keyed by host and entry key, their fields in the body: the table's
-- own lease (claimed_until) is gone. Every entry keeps its meaning: a
-- sent one stays done (a comment's key still keeps it from being posted
-- twice), a failed one given up, a pending one due when it was; one a
-- sender held when the upgrade stopped it is due when that lease would
-- have ended, as another replica would have found it. Entries are kept
-- GithubRetention (30 days) after they were first queued, as before.
INSERT INTO outbox (service, kind, msg_key, body, seq, state, attempts, next_attempt, lease_owner, last_error, created, updated, expires)
    SELECT 'github', 'send', host || ' ' || outbox_key,
        json_object('host', host, 'key', outbox_key, 'kind', kind, 'owner', owner, 'repo', repo, 'target', target,
            'installationId', installation_id, 'body', body),
        seq, CASE state WHEN 'sent' THEN 'done' ELSE state END, attempts,
        CASE WHEN claimed_until > next_attempt THEN claimed_until ELSE next_attempt END,
        '', last_error, created, created, created + 2592000000
    FROM github_outbox;
DROP TABLE github_outbox;
