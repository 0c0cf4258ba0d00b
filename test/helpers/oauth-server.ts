// A real OAuth 2.0 authorization server for tests: oidc-provider (not
// written here), served over HTTPS on 127.0.0.1 with a throwaway CA. It has
// confidential clients for client_credentials (one registered for HTTP
// Basic, one for the form body), a confidential and a public client for
// refresh_token, refresh token rotation on, and a short access token life.
// Refresh tokens are minted through the provider's own Grant and
// RefreshToken models, as its authorization-code flow would store them;
// access tokens are checked the way a resource server holding the
// provider's store would, through its AccessToken and ClientCredentials
// models (expired, revoked or unknown: null).
import { randomBytes } from 'node:crypto';
import { generateKeyPairSync } from 'node:crypto';
import { createServer, Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { makeTestCa, type TestCa } from './https-upstream';

export interface OAuthClient {
  id: string;
  secret: string | null; // null: a public client
  auth: 'basic' | 'post' | 'none';
}

export interface OAuthServerConfig {
  // Serve with this CA's certificate (for `host`) instead of a new CA for 127.0.0.1.
  ca?: TestCa;
  host?: string;
  accessTokenTtlS?: number; // default 300
  refreshTokenTtlS?: number; // default 3600
  scopes?: string[]; // the scopes the clients may have; default api:read api:write reports
}

export interface OAuthServer {
  issuer: string;
  tokenUrl: string; // what a definition's token_url would hold
  caCert: string;
  scopes: string[];
  clients: { basic: OAuthClient; post: OAuthClient; refresh: OAuthClient; publicRefresh: OAuthClient };
  // A refresh token for one of the refresh clients, stored as an authorization-code flow would.
  mintRefreshToken(clientId: string, scopes: string[]): Promise<string>;
  // What a resource server learns of a bearer token: its client and scope, or null.
  accessTokenValid(token: string): Promise<{ clientId: string; scope: string } | null>;
  // Whether a refresh token is still stored, not consumed by a rotation and not expired.
  refreshTokenUsable(token: string): Promise<boolean>;
  revokeRefreshToken(token: string): Promise<void>;
  // Token requests seen, by grant_type ("" when the request had none), accepted or not.
  tokenRequests(grant: string): number;
  close(): Promise<void>;
}

// The parts of oidc-provider used here (it ships no type declarations).
interface StoredToken {
  clientId: string;
  scope?: string;
  consumed?: unknown;
  save(): Promise<string>;
  destroy(): Promise<void>;
}
interface TokenModel {
  find(value: string): Promise<StoredToken | undefined>;
}
interface ProviderInstance {
  callback(): (req: IncomingMessage, res: ServerResponse) => void;
  on(event: string, listener: (ctx: { oidc?: { params?: Record<string, unknown> } }) => void): void;
  Client: { find(id: string): Promise<unknown> };
  Grant: new (p: { clientId: string; accountId: string }) => { addOIDCScope(s: string): void; save(): Promise<string> };
  RefreshToken: TokenModel & (new (p: Record<string, unknown>) => StoredToken);
  AccessToken: TokenModel;
  ClientCredentials: TokenModel;
}
type ProviderClass = new (issuer: string, config: Record<string, unknown>) => ProviderInstance;

// oidc-provider is an ES module; a specifier typed as a plain string keeps
// the compiler from looking for declarations it does not ship.
async function loadProvider(): Promise<ProviderClass> {
  const specifier: string = 'oidc-provider';
  return ((await import(specifier)) as { default: ProviderClass }).default;
}

// The provider's storage, one per server: the package's own in-memory store
// is shared by every provider in the process and announces itself on stderr.
function memoryAdapter(): new (model: string) => object {
  const rows = new Map<string, { payload: Record<string, unknown>; expiresAt: number }>();
  const byGrant = new Map<string, string[]>();
  const live = (key: string): Record<string, unknown> | undefined => {
    const row = rows.get(key);
    if (row === undefined || row.expiresAt <= Date.now()) return undefined;
    return row.payload;
  };
  return class {
    constructor(private readonly model: string) {}
    private key(id: string): string {
      return `${this.model}:${id}`;
    }
    async upsert(id: string, payload: Record<string, unknown>, expiresIn: number): Promise<void> {
      const key = this.key(id);
      rows.set(key, { payload, expiresAt: Date.now() + expiresIn * 1000 });
      if (typeof payload.grantId === 'string')
        byGrant.set(payload.grantId, [...(byGrant.get(payload.grantId) ?? []), key]);
      if (typeof payload.uid === 'string') rows.set(`uid:${payload.uid}`, { payload: { id }, expiresAt: Infinity });
    }
    async find(id: string): Promise<Record<string, unknown> | undefined> {
      return live(this.key(id));
    }
    async findByUid(uid: string): Promise<Record<string, unknown> | undefined> {
      const id = live(`uid:${uid}`)?.id;
      return typeof id === 'string' ? this.find(id) : undefined;
    }
    async findByUserCode(): Promise<undefined> {
      return undefined;
    }
    async consume(id: string): Promise<void> {
      const payload = live(this.key(id));
      if (payload !== undefined) payload.consumed = Math.floor(Date.now() / 1000);
    }
    async destroy(id: string): Promise<void> {
      rows.delete(this.key(id));
    }
    async revokeByGrantId(grantId: string): Promise<void> {
      for (const key of byGrant.get(grantId) ?? []) rows.delete(key);
      byGrant.delete(grantId);
    }
  };
}

// Secrets with the characters RFC 6749 §2.3.1 has the client form-encode
// before HTTP Basic (':' '+' '%' ' ' '&' '='), so a client that skips the
// encoding is refused.
function clientSecret(): string {
  return `s3cr:t+${randomBytes(12).toString('hex')} %&=/${randomBytes(12).toString('base64url')}`;
}

function listen(server: Server): Promise<number> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)));
}

export async function startOAuthServer(cfg: OAuthServerConfig = {}): Promise<OAuthServer> {
  const Provider = await loadProvider();
  const ca = cfg.ca ?? makeTestCa(['127.0.0.1']);
  const scopes = cfg.scopes ?? ['api:read', 'api:write', 'reports'];
  const clients = {
    // A client id with ':' as well: Basic needs it form-encoded too.
    basic: { id: 'reports:basic', secret: clientSecret(), auth: 'basic' as const },
    post: { id: 'reports-post', secret: clientSecret(), auth: 'post' as const },
    refresh: { id: 'mail-sync', secret: clientSecret(), auth: 'basic' as const },
    publicRefresh: { id: 'mail-cli', secret: null, auth: 'none' as const },
  };
  const registered = [
    { c: clients.basic, grant: 'client_credentials', method: 'client_secret_basic' },
    { c: clients.post, grant: 'client_credentials', method: 'client_secret_post' },
    { c: clients.refresh, grant: 'refresh_token', method: 'client_secret_basic' },
    { c: clients.publicRefresh, grant: 'refresh_token', method: 'none' },
  ].map(({ c, grant, method }) => ({
    client_id: c.id,
    ...(c.secret === null ? {} : { client_secret: c.secret }),
    // oidc-provider lets only a client of the authorization-code flow hold refresh tokens.
    ...(grant === 'refresh_token'
      ? {
          grant_types: ['authorization_code', 'refresh_token'],
          response_types: ['code'],
          redirect_uris: ['https://127.0.0.1/cb'],
        }
      : { grant_types: [grant], response_types: [], redirect_uris: [] }),
    token_endpoint_auth_method: method,
    id_token_signed_response_alg: 'ES256',
    scope: scopes.join(' '),
  }));

  const sockets = new Set<Socket>();
  const server = createServer({ key: ca.key, cert: ca.cert });
  server.on('secureConnection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  const port = await listen(server);
  const issuer = `https://${cfg.host ?? '127.0.0.1'}:${port}`;
  const signingKey = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'jwk' });
  const provider = new Provider(issuer, {
    adapter: memoryAdapter(),
    clients: registered,
    jwks: { keys: [{ ...signingKey, kid: 'test', use: 'sig', alg: 'ES256' }] },
    cookies: { keys: [randomBytes(32).toString('hex')] },
    findAccount: async (_ctx: unknown, sub: string) => ({ accountId: sub, claims: async () => ({ sub }) }),
    features: { clientCredentials: { enabled: true }, devInteractions: { enabled: false } },
    // offline_access: the scope of refresh tokens, which turns the refresh_token grant on.
    scopes: [...scopes, 'offline_access'],
    rotateRefreshToken: true,
    ttl: {
      AccessToken: cfg.accessTokenTtlS ?? 300,
      ClientCredentials: cfg.accessTokenTtlS ?? 300,
      RefreshToken: cfg.refreshTokenTtlS ?? 3600,
      Grant: 24 * 3600,
    },
  });
  const counts = new Map<string, number>();
  const count = (ctx: { oidc?: { params?: Record<string, unknown> } }): void => {
    const grant = ctx.oidc?.params?.grant_type;
    const key = typeof grant === 'string' ? grant : '';
    counts.set(key, (counts.get(key) ?? 0) + 1);
  };
  provider.on('grant.success', count);
  provider.on('grant.error', count);
  server.on('request', provider.callback());

  const mintRefreshToken = async (clientId: string, granted: string[]): Promise<string> => {
    const client = await provider.Client.find(clientId);
    if (client === undefined) throw new Error(`no client ${clientId}`);
    const accountId = `user-${randomBytes(4).toString('hex')}`;
    const grant = new provider.Grant({ clientId, accountId });
    grant.addOIDCScope(granted.join(' '));
    const grantId = await grant.save();
    const token = new provider.RefreshToken({
      client,
      accountId,
      grantId,
      gty: 'authorization_code',
      scope: granted.join(' '),
      authTime: Math.floor(Date.now() / 1000),
    });
    return token.save();
  };

  return {
    issuer,
    tokenUrl: `${issuer}/token`,
    caCert: ca.caCert,
    scopes,
    clients,
    mintRefreshToken,
    accessTokenValid: async (token) => {
      const found = (await provider.AccessToken.find(token)) ?? (await provider.ClientCredentials.find(token));
      return found === undefined ? null : { clientId: found.clientId, scope: found.scope ?? '' };
    },
    refreshTokenUsable: async (token) => {
      const found = await provider.RefreshToken.find(token);
      return found !== undefined && !found.consumed;
    },
    revokeRefreshToken: async (token) => {
      await (await provider.RefreshToken.find(token))?.destroy();
    },
    tokenRequests: (grant) => counts.get(grant) ?? 0,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => {
          if (!cfg.ca) ca.cleanup();
          resolve();
        });
      }),
  };
}
