-- Third-party websites' OAuth2 flow (issue 37, Taskcluster's
-- /login/oauth/...): a code the person's consent gave a registered site
-- (used once, within minutes), and the access token the site traded it
-- for. Both are keyed by the SHA-256 of the secret, never the secret; the
-- grant holds what the person consented to and who they were.
CREATE TABLE login_oauth_codes (
    code_hash    TEXT PRIMARY KEY,
    client_id    TEXT NOT NULL,
    redirect_uri TEXT NOT NULL,
    provider     TEXT NOT NULL,
    identity     TEXT NOT NULL,
    roles        TEXT NOT NULL,
    scopes       TEXT NOT NULL,
    challenge    TEXT NOT NULL,
    grant_expires INTEGER NOT NULL,
    expires      INTEGER NOT NULL
);
CREATE INDEX login_oauth_codes_expires ON login_oauth_codes (expires);
CREATE TABLE login_oauth_tokens (
    token_hash   TEXT PRIMARY KEY,
    client_id    TEXT NOT NULL,
    provider     TEXT NOT NULL,
    identity     TEXT NOT NULL,
    roles        TEXT NOT NULL,
    scopes       TEXT NOT NULL,
    expires      INTEGER NOT NULL
);
CREATE INDEX login_oauth_tokens_expires ON login_oauth_tokens (expires);
CREATE INDEX login_oauth_tokens_identity ON login_oauth_tokens (identity);
