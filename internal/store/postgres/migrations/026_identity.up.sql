-- hopper as an OpenID issuer for tasks (docs/identity.md).
--
-- The keys identity tokens are signed with, their private part sealed
-- with the server key. The generation is the key: replicas racing to
-- rotate insert the same generation and one wins, so every replica signs
-- with and publishes the same keys.
CREATE TABLE signing_keys (
    generation BIGINT PRIMARY KEY,
    key_id     TEXT COLLATE "C" NOT NULL UNIQUE,
    algorithm  TEXT NOT NULL,
    sealed     TEXT NOT NULL,
    created    BIGINT NOT NULL,
    activates  BIGINT NOT NULL
);

-- What the forge integration vouches for about a task it created (the
-- repository, ref, commit, event and trust of its tokens' claims),
-- written before the task is created so no token of the task can be
-- asked for before it exists; kept until the task expires.
CREATE TABLE task_identities (
    task_id TEXT COLLATE "C" PRIMARY KEY,
    claims  TEXT NOT NULL,
    expires BIGINT NOT NULL
);
CREATE INDEX task_identities_expires ON task_identities (expires);
