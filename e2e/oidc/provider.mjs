// A generic OpenID Connect provider for hopper's sign-in tests: panva's
// oidc-provider (certified by the OpenID Foundation), with its development
// login and consent pages, the clients and people the Go test hands over
// in OIDC_CONFIG, and a groups claim in the ID token. It prints
// "listening <issuer>" once it serves.
//
//   OIDC_CONFIG='{"port": 4000, "clients": [...], "accounts": {"ann": {...}}}' node provider.mjs
import Provider from 'oidc-provider';

const cfg = JSON.parse(process.env.OIDC_CONFIG ?? '{}');
const issuer = `http://127.0.0.1:${cfg.port}`;

const provider = new Provider(issuer, {
  clients: cfg.clients.map((c) => ({
    grant_types: ['authorization_code'], response_types: ['code'], token_endpoint_auth_method: 'client_secret_basic', ...c,
  })),
  scopes: ['openid', 'profile', 'email', 'groups'],
  claims: { openid: ['sub'], profile: ['preferred_username', 'name'], email: ['email', 'email_verified'], groups: ['groups'] },
  // The claims of the scopes asked for go in the ID token too (hopper
  // reads the person, their e-mail and groups from it, as from Gitea's).
  conformIdTokenClaims: false,
  features: { devInteractions: { enabled: true } },
  pkce: { required: () => true },
  cookies: { keys: [cfg.cookieKey ?? 'hopper-e2e-cookie-key'] },
  async findAccount(ctx, id) {
    const who = cfg.accounts[id];
    if (!who) return undefined;
    return { accountId: id, claims: async () => ({ sub: id, ...who }) };
  },
});
provider.proxy = false;

const server = provider.listen(cfg.port, '127.0.0.1', () => console.log(`listening ${issuer}`));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
