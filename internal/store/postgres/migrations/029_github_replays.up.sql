-- A forge's replay (Gitea's Replay and Test delivery) resends an event's
-- body under a new delivery id: digest identifies the body, and only the
-- first delivery of a body on a host is processed (replay_of names it on
-- the replays). Deliveries that failed are listed on the console's Builds
-- page, newest first.
ALTER TABLE github_deliveries ADD COLUMN digest TEXT NOT NULL DEFAULT '';
ALTER TABLE github_deliveries ADD COLUMN replay_of TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX github_deliveries_digest ON github_deliveries (host, digest) WHERE digest <> '' AND replay_of = '';
CREATE INDEX github_deliveries_errors ON github_deliveries (received) WHERE error <> '';
