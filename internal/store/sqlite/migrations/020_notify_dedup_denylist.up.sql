-- Duplicate API requests and the denylist's comparison (issue 34).
-- See the PostgreSQL migration of the same number; SQLite compares text
-- bytewise already.
--
-- notify_dedup holds, per request hash, when the last request so hashed was
-- stored: an API request is stored only by the statement that inserts its
-- hash or moves an expired one forward (one upsert), so identical requests
-- racing on several replicas store one notification. Counting the outbox's
-- rows first let them all through on PostgreSQL.
CREATE TABLE notify_dedup (
    dedup   TEXT PRIMARY KEY,
    created BIGINT NOT NULL
);
INSERT INTO notify_dedup (dedup, created)
    SELECT dedup, MAX(created) FROM notify_outbox WHERE dedup IS NOT NULL GROUP BY dedup;
DROP INDEX notify_outbox_dedup;

-- The denylist is keyed by address_key: an email address with its ASCII
-- letters in lower case (mail systems deliver DENY@example.com to
-- deny@example.com), any other address as it is. notification_address
-- keeps the spelling first added, for listing.
CREATE TABLE notify_denylist_keyed (
    notification_type    TEXT NOT NULL,
    address_key          TEXT NOT NULL,
    notification_address TEXT NOT NULL,
    PRIMARY KEY (notification_type, address_key)
);
INSERT INTO notify_denylist_keyed (notification_type, address_key, notification_address)
    SELECT notification_type,
        CASE WHEN notification_type = 'email' THEN lower(notification_address) ELSE notification_address END,
        MIN(notification_address)
    FROM notify_denylist
    GROUP BY 1, 2;
DROP TABLE notify_denylist;
ALTER TABLE notify_denylist_keyed RENAME TO notify_denylist;
