-- The login service's people (issue 37): the roles each login identity
-- had when last seen (at sign-in, or when the credential scanner asked
-- the provider again) and, sealed with the server's key, the provider's
-- grant (access and refresh tokens) the scanner asks with.
CREATE TABLE login_identities (
    identity TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    roles    TEXT NOT NULL,
    grant_sealed TEXT NOT NULL,
    updated  INTEGER NOT NULL
);
