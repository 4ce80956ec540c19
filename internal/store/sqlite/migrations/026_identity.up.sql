-- hopper as an OpenID issuer for tasks (docs/identity.md); see the
-- PostgreSQL migration of the same number for why each piece exists.
CREATE TABLE signing_keys (
    generation BIGINT PRIMARY KEY,
    key_id     TEXT NOT NULL UNIQUE,
    algorithm  TEXT NOT NULL,
    sealed     TEXT NOT NULL,
    created    BIGINT NOT NULL,
    activates  BIGINT NOT NULL
);

CREATE TABLE task_identities (
    task_id TEXT PRIMARY KEY,
    claims  TEXT NOT NULL,
    expires BIGINT NOT NULL
);
CREATE INDEX task_identities_expires ON task_identities (expires);

