// A local stand-in for GitHub's installation-token endpoint, over HTTPS with
// a throwaway CA: POST {prefix}/app/installations/{id}/access_tokens. It
// checks the app JWT as GitHub does (RS256 signature verified with the app's
// public key by node:crypto, iat not in the future, exp in the future and at
// most 10 minutes after iat, iss the app id), the installation id, and that
// the narrowing asks for no repository or permission the installation lacks;
// then answers 201 with a fresh token, or 401/404/422 with a JSON message.
// answerNext() queues a canned answer, for hostile or broken servers.
import { createPublicKey, randomBytes, verify, KeyObject } from 'node:crypto';
import { makeTestCa, startHttpsUpstream, SeenRequest, type Handler, type TestCa } from './https-upstream';

export interface Installation {
  repositories: string[];
  permissions: Record<string, string>; // e.g. { contents: 'write', issues: 'read' }
}

export interface AppServerConfig {
  appId: number;
  publicKey: string | Buffer | KeyObject; // PEM of the app's public (or private) key
  installations: Record<number, Installation>;
  tokenLifeS?: number; // default 3600, as GitHub
  tokenDelayMs?: number; // each token answer held this long (default none)
  prefix?: string; // '' for api.github.com, '/api/v3' for GitHub Enterprise Server
  // Serve with this CA's certificate (for `host`) instead of a new CA for 127.0.0.1.
  ca?: TestCa;
  host?: string;
  // Every request that is not a token request: the API calls made with a token.
  api?: Handler;
}

export interface IssuedToken {
  token: string;
  installationId: number;
  repositories: string[] | 'all';
  permissions: Record<string, string>;
  expiresAt: string;
}

export interface AppServer {
  api: string; // what a definition's `api` would hold
  caCert: string;
  requests: SeenRequest[];
  issued: IssuedToken[];
  answerNext(status: number, body: string | Buffer, contentType?: string): void;
  close(): Promise<void>;
}

const LEVEL: Record<string, number> = { read: 1, write: 2, admin: 3 };

type Verdict = { status: number; body: unknown };

function fail(status: number, message: string): Verdict {
  return { status, body: { message, documentation_url: 'https://docs.github.com/rest' } };
}

function decodeJson(part: string): unknown {
  try {
    return JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
}

// null when the bearer JWT is the app's and current; otherwise GitHub's 401.
function checkJwt(authorization: string | undefined, cfg: AppServerConfig, key: KeyObject): Verdict | null {
  const m = /^Bearer ([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)$/.exec(authorization ?? '');
  if (m === null) return fail(401, 'A JSON web token could not be decoded');
  const [, h, p, s] = m as unknown as [string, string, string, string];
  const header = decodeJson(h) as { alg?: unknown } | undefined;
  if (header?.alg !== 'RS256') return fail(401, 'A JSON web token could not be decoded');
  if (!verify('sha256', Buffer.from(`${h}.${p}`, 'ascii'), key, Buffer.from(s, 'base64url'))) {
    return fail(401, 'A JSON web token could not be decoded');
  }
  const claims = decodeJson(p) as { iat?: unknown; exp?: unknown; iss?: unknown } | undefined;
  const now = Math.floor(Date.now() / 1000);
  const { iat, exp, iss } = claims ?? {};
  if (iss !== String(cfg.appId) && iss !== cfg.appId) return fail(401, 'Integration not found for this JWT issuer');
  if (!Number.isInteger(iat) || (iat as number) > now + 5) return fail(401, 'The issued at time is in the future');
  if (!Number.isInteger(exp) || (exp as number) <= now) return fail(401, 'The expiration time is in the past');
  if ((exp as number) - (iat as number) > 600) return fail(401, 'The expiration time is too far in the future');
  return null;
}

function issue(cfg: AppServerConfig, url: string, body: Buffer, issued: IssuedToken[]): Verdict {
  const m = /^(.*)\/app\/installations\/(\d+)\/access_tokens$/.exec(url);
  if (m === null || m[1] !== (cfg.prefix ?? '')) return fail(404, 'Not Found');
  const installationId = Number(m[2]);
  const inst = cfg.installations[installationId];
  if (inst === undefined) return fail(404, 'Not Found');
  let ask: { repositories?: unknown; permissions?: unknown };
  try {
    ask = body.length === 0 ? {} : (JSON.parse(body.toString('utf8')) as typeof ask);
  } catch {
    return fail(400, 'Problems parsing JSON');
  }
  if (typeof ask !== 'object' || ask === null || Array.isArray(ask)) return fail(400, 'Problems parsing JSON');
  let repositories: string[] | 'all' = 'all';
  if (ask.repositories !== undefined) {
    const r = ask.repositories;
    if (!Array.isArray(r) || !r.every((n) => typeof n === 'string' && inst.repositories.includes(n))) {
      return fail(
        422,
        'There is at least one repository that does not exist or is not accessible to the parent installation.',
      );
    }
    repositories = r as string[];
  }
  let permissions = inst.permissions;
  if (ask.permissions !== undefined) {
    const asked = ask.permissions as Record<string, unknown>;
    if (typeof asked !== 'object' || asked === null) return fail(422, 'Invalid request.');
    for (const [k, v] of Object.entries(asked)) {
      const has = inst.permissions[k];
      if (typeof v !== 'string' || has === undefined || (LEVEL[v] ?? 99) > (LEVEL[has] ?? 0)) {
        return fail(422, 'The permissions requested are not granted to this installation.');
      }
    }
    permissions = asked as Record<string, string>;
  }
  const token = `ghs_${randomBytes(27).toString('base64url').replace(/[-_]/g, 'x')}`;
  const expiresAt = new Date(Math.floor(Date.now() / 1000) * 1000 + (cfg.tokenLifeS ?? 3600) * 1000)
    .toISOString()
    .replace(/\.\d{3}Z$/, 'Z');
  issued.push({ token, installationId, repositories, permissions, expiresAt });
  return {
    status: 201,
    body: {
      token,
      expires_at: expiresAt,
      permissions,
      repository_selection: repositories === 'all' ? 'all' : 'selected',
      repositories: (repositories === 'all' ? inst.repositories : repositories).map((name, i) => ({ id: i + 1, name })),
    },
  };
}

export async function startGithubAppServer(cfg: AppServerConfig): Promise<AppServer> {
  const ca = cfg.ca ?? makeTestCa(['127.0.0.1']);
  const key = createPublicKey(cfg.publicKey);
  const issued: IssuedToken[] = [];
  const canned: { status: number; body: Buffer; type: string }[] = [];
  const upstream = await startHttpsUpstream(ca, (req, body, res) => {
    const next = canned.shift();
    if (next !== undefined) {
      res.writeHead(next.status, { 'content-type': next.type, 'content-length': next.body.length });
      res.end(next.body);
      return;
    }
    if (cfg.api && !/\/app\/installations\/[^/]+\/access_tokens$/.test(req.url ?? '')) return cfg.api(req, body, res);
    const verdict =
      req.method !== 'POST'
        ? fail(404, 'Not Found')
        : (checkJwt(req.headers.authorization, cfg, key) ?? issue(cfg, req.url ?? '', body, issued));
    const text = Buffer.from(JSON.stringify(verdict.body));
    const answer = (): void => {
      res.writeHead(verdict.status, {
        'content-type': 'application/json; charset=utf-8',
        'content-length': text.length,
      });
      res.end(text);
    };
    if (cfg.tokenDelayMs) setTimeout(answer, cfg.tokenDelayMs);
    else answer();
  });
  return {
    api: `https://${cfg.host ?? '127.0.0.1'}:${upstream.port}${cfg.prefix ?? ''}`,
    caCert: ca.caCert,
    requests: upstream.requests,
    issued,
    answerNext: (status, body, type = 'application/json') => canned.push({ status, body: Buffer.from(body), type }),
    close: async () => {
      await upstream.close();
      if (!cfg.ca) ca.cleanup();
    },
  };
}
