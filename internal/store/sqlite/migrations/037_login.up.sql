-- The login service (issue 37): a sign-in under way with a provider
-- (keyed by the SHA-256 of its state; the nonce and PKCE verifier are
-- used once, when the provider sends the person back), and a person's
-- signed-in session (keyed by the SHA-256 of its cookie's secret), from
-- which the console takes temporary credentials until it expires.
CREATE TABLE login_attempts (
    state_hash TEXT PRIMARY KEY,
    provider   TEXT NOT NULL,
    nonce      TEXT NOT NULL,
    verifier   TEXT NOT NULL,
    return_to  TEXT NOT NULL,
    expires    INTEGER NOT NULL
);
CREATE INDEX login_attempts_expires ON login_attempts (expires);
CREATE TABLE login_sessions (
    id_hash  TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    identity TEXT NOT NULL,
    roles    TEXT NOT NULL,
    created  INTEGER NOT NULL,
    expires  INTEGER NOT NULL
);
CREATE INDEX login_sessions_expires ON login_sessions (expires);
CREATE INDEX login_sessions_identity ON login_sessions (identity);
