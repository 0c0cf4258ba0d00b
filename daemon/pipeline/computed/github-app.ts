// GitHub App installation tokens (SPEC §13): the app's JWT, the request that
// exchanges it for an installation token, the reading of GitHub's answer,
// and the cache that keeps a token until shortly before it expires. Nothing
// here opens a connection: the caller sends the request through the
// pipeline's pinned connections and hands the answer back.
import { sign } from 'node:crypto';
import { githubAppKey as appKey } from '../../../shared/credential/github-app-key';
import { packageVersion } from '../../../shared/version';

// GitHub accepts a JWT whose exp is at most 10 minutes after iat; iat is set
// 60 s in the past so a server clock slightly behind ours still accepts it.
const CLOCK_DRIFT_S = 60;
const JWT_LIFE_S = 9 * 60;

// A token answer lists the repositories it covers (up to 500 full repository
// objects): a few MiB at most. Anything larger is not GitHub's answer.
export const MAX_TOKEN_ANSWER_BYTES = 8 * 1024 * 1024;
// Tokens go into an Authorization header: visible ASCII, no space, and of a
// size a header can carry (GitHub's newer tokens embed a JWT: longer than 40).
const TOKEN_SHAPE = /^[\x21-\x7e]+$/;
const MAX_TOKEN_CHARS = 8192;

function base64url(b: Buffer | string): string {
  return Buffer.from(b).toString('base64url');
}

// The app's JWT (RS256): iat 60 s before now, exp 9 minutes after iat, iss
// the app id as the decimal string GitHub's examples use.
export function appJwt(privateKeyPem: Buffer, appId: number, now: Date): string {
  if (!Number.isSafeInteger(appId) || appId <= 0) throw new Error('github_app.app_id must be a positive integer');
  const key = appKey(privateKeyPem);
  const iat = Math.floor(now.getTime() / 1000) - CLOCK_DRIFT_S;
  const header = base64url(JSON.stringify({ alg: 'RS256', typ: 'JWT' }));
  const payload = base64url(JSON.stringify({ iat, exp: iat + JWT_LIFE_S, iss: String(appId) }));
  const signingInput = `${header}.${payload}`;
  const signature = sign('sha256', Buffer.from(signingInput, 'ascii'), key);
  return `${signingInput}.${base64url(signature)}`;
}

// Checked where the secret is stored (shared, for `cred add` and the daemon).
export { githubAppKeyProblem } from '../../../shared/credential/github-app-key';

export interface TokenRequest {
  method: 'POST';
  url: string;
  headers: Record<string, string>;
  body: Buffer;
}

export interface GithubAppDef {
  app_id: number;
  installation_id: number;
  api: string;
  repositories?: string[];
  permissions?: Record<string, string>;
}

// POST {api}/app/installations/{id}/access_tokens with the JWT as bearer; the
// body narrows the token only with what the definition names (an empty
// object asks for everything the installation has).
export function installationTokenRequest(def: GithubAppDef, jwt: string): TokenRequest {
  if (!Number.isSafeInteger(def.installation_id) || def.installation_id <= 0) {
    throw new Error('github_app.installation_id must be a positive integer');
  }
  const base = def.api.replace(/\/+$/, '');
  const narrowing: { repositories?: string[]; permissions?: Record<string, string> } = {};
  if (def.repositories !== undefined) narrowing.repositories = [...def.repositories];
  if (def.permissions !== undefined) narrowing.permissions = { ...def.permissions };
  return {
    method: 'POST',
    url: `${base}/app/installations/${def.installation_id}/access_tokens`,
    headers: {
      accept: 'application/vnd.github+json',
      authorization: `Bearer ${jwt}`,
      'x-github-api-version': '2022-11-28',
      'content-type': 'application/json',
      'user-agent': `postern/${packageVersion()}`,
    },
    body: Buffer.from(JSON.stringify(narrowing), 'utf8'),
  };
}

export type TokenAnswer = { ok: true; token: string; expiresAt: Date } | { ok: false; code: string; message: string };

function refused(message: string): TokenAnswer {
  return { ok: false, code: 'upstream_error', message };
}

// What each failing status most likely means for this request.
const STATUS_MEANING: Record<number, string> = {
  401: 'the app key or github_app.app_id is wrong (or the system clock is far off)',
  403: 'the app may not create tokens for this installation (suspended, or rate limited)',
  404: 'no installation has this github_app.installation_id for this app',
  422: 'github_app.repositories or github_app.permissions ask for more than the installation has',
};

// GitHub's own explanation is worth showing ("The permissions requested are
// not granted to this installation."), but only when it is plainly prose:
// short, ordinary punctuation, and no run of 20 characters without a space,
// so an echoed JWT or token can never pass through. GitHub's error bodies are
// a few hundred bytes; a large one is not parsed at all.
const MAX_ERROR_BODY_BYTES = 64 * 1024;

function upstreamExplanation(body: Buffer): string {
  if (body.length > MAX_ERROR_BODY_BYTES) return '';
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return '';
  }
  const m = (parsed as { message?: unknown } | null)?.message;
  if (typeof m !== 'string' || m.length === 0 || m.length > 200) return '';
  if (!/^[A-Za-z0-9 .,:;'()\-_/?!]+$/.test(m) || /\S{20}/.test(m)) return '';
  return ` (GitHub: "${m}")`;
}

// expires_at as GitHub writes it ("2016-07-11T22:14:10Z"): an ISO 8601
// UTC-or-offset time whose fields are a real date and time, or null. Date.parse
// alone would take 30 February as 2 March and 24:00 as the next day: the
// fields, read back, must be the ones written.
function isoTime(s: string): Date | null {
  const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/.exec(s);
  if (m === null) return null;
  const [y, mo, d, h, mi, se] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const written = new Date(Date.UTC(y, mo - 1, d, h, mi, se));
  if (written.getUTCFullYear() !== y || written.getUTCMonth() !== mo - 1 || written.getUTCDate() !== d) return null;
  const t = Date.parse(s);
  return Number.isNaN(t) ? null : new Date(t);
}

// The installation token and its expiry from the endpoint's answer (201), or
// a refusal naming the status and its likely cause. No message quotes the
// token or the answer's body beyond GitHub's vetted explanation.
export function parseInstallationToken(status: number, body: Buffer, now: Date): TokenAnswer {
  if (status !== 201) {
    const meaning =
      STATUS_MEANING[status] ??
      (status >= 500 ? 'GitHub could not answer; try again later' : 'a token comes only with 201');
    return refused(`the GitHub App token endpoint answered ${status}: ${meaning}${upstreamExplanation(body)}`);
  }
  if (body.length > MAX_TOKEN_ANSWER_BYTES) {
    return refused(`the GitHub App token answer is over ${MAX_TOKEN_ANSWER_BYTES} bytes; it is not GitHub's answer`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return refused('the GitHub App token answer (201) is not JSON');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    return refused('the GitHub App token answer (201) is not a JSON object');
  }
  const { token, expires_at: expiresAtText } = parsed as { token?: unknown; expires_at?: unknown };
  if (token === undefined) return refused('the GitHub App token answer (201) has no "token"');
  if (typeof token !== 'string' || token.length === 0 || token.length > MAX_TOKEN_CHARS || !TOKEN_SHAPE.test(token)) {
    return refused('the GitHub App token answer (201) has a "token" that is not a usable token string');
  }
  if (expiresAtText === undefined) return refused('the GitHub App token answer (201) has no "expires_at"');
  const expiresAt = typeof expiresAtText === 'string' ? isoTime(expiresAtText) : null;
  if (expiresAt === null) {
    return refused('the GitHub App token answer (201) has an "expires_at" that is not an ISO 8601 time');
  }
  if (expiresAt.getTime() <= now.getTime()) {
    return refused('the GitHub App token answer (201) has an "expires_at" in the past; check the system clock');
  }
  return { ok: true, token, expiresAt };
}

// A token is used until 5 minutes before it expires, or until half its life
// has passed when that life was shorter than 10 minutes, so a request never
// leaves with a token about to lapse.
const REFRESH_MARGIN_MS = 5 * 60 * 1000;

// A token obtained for a request, and the refresh token the server rotated
// while obtaining it (now in the vault; the requests that waited for this
// token opened the old secret, so they redact it besides their own values).
export interface Obtained {
  token: string;
  rotated: string | null;
}

interface CachedToken {
  definitionHash: string;
  token: string;
  refreshAt: number; // by the wall clock
  monoRefreshAt: number; // by the monotonic clock (performance.now)
}

// Installation tokens per credential name, valid only for the definition
// (hash) they were obtained for. JavaScript strings cannot be overwritten in
// place: forget() and clear() drop every reference so the collector can
// reclaim them, which is the most a string allows. A token obtained by a
// request begun before its credential changed (a rotated secret keeps the
// definition) or before a lock is that request's alone: it is not kept,
// and no later request shares its way there.
export class TokenCache {
  private readonly entries = new Map<string, CachedToken>();
  private readonly obtaining = new Map<string, Promise<Obtained>>();
  // A count of changes: when each name last changed, and the last clear().
  private changes = 0;
  private readonly changed = new Map<string, number>();
  private cleared = 0;

  // The cached token, else the one being obtained, else `obtain`'s: one
  // token request per credential and definition at a time, so concurrent
  // first requests make one (each could read a large answer), and an OAuth
  // refresh token is spent once. `obtain` is given the ticket put() wants.
  obtainOnce(name: string, definitionHash: string, obtain: (ticket: number) => Promise<Obtained>): Promise<Obtained> {
    const cached = this.get(name, definitionHash, new Date());
    if (cached !== null) return Promise.resolve({ token: cached, rotated: null });
    const key = `${name}\0${definitionHash}`;
    const running = this.obtaining.get(key);
    if (running) return running;
    const p: Promise<Obtained> = obtain(this.ticket()).finally(() => {
      if (this.obtaining.get(key) === p) this.obtaining.delete(key);
    });
    this.obtaining.set(key, p);
    return p;
  }

  get(name: string, definitionHash: string, now: Date): string | null {
    const e = this.entries.get(name);
    if (e === undefined) return null;
    if (e.definitionHash !== definitionHash || now.getTime() >= e.refreshAt || performance.now() >= e.monoRefreshAt) {
      this.entries.delete(name);
      return null;
    }
    return e.token;
  }

  // `now` is when the token was obtained (for the half-life margin); the
  // caller may omit it to mean the present.
  // What obtainOnce gives `obtain`: the count of changes so far.
  ticket(): number {
    return this.changes;
  }

  // `ticket` is the one obtainOnce gave: a token whose credential changed
  // (or the vault was locked) since is not kept.
  put(name: string, definitionHash: string, token: string, expiresAt: Date, ticket: number, now = new Date()): void {
    if (ticket < this.cleared || ticket < (this.changed.get(name) ?? 0)) return;
    const life = expiresAt.getTime() - now.getTime();
    if (!(life > 0)) {
      this.entries.delete(name);
      return;
    }
    const margin = Math.min(REFRESH_MARGIN_MS, life / 2);
    // Its life counted by both clocks (daemon/two-clocks.ts): a wall clock
    // stepped back would serve it past its expires_in.
    const refreshAt = expiresAt.getTime() - margin;
    this.entries.set(name, {
      definitionHash,
      token,
      refreshAt,
      monoRefreshAt: performance.now() + (refreshAt - now.getTime()),
    });
  }

  forget(name: string): void {
    this.entries.delete(name);
    this.changed.set(name, ++this.changes);
    for (const key of [...this.obtaining.keys()]) if (key.startsWith(`${name}\0`)) this.obtaining.delete(key);
  }

  clear(): void {
    this.entries.clear();
    this.obtaining.clear();
    this.changed.clear();
    this.cleared = ++this.changes;
  }
}
