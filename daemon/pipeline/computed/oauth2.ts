// OAuth 2.0 access tokens (SPEC §13, RFC 6749): the reading of the stored
// secret, the token request for the client credentials grant (§4.4) or the
// refresh token grant (§6), and the reading of the token endpoint's answer
// (§5.1, §5.2). Nothing here opens a connection: the caller sends the
// request through the pipeline's pinned connections and hands the answer
// back. No message here quotes a secret, a token or an answer's body beyond
// a vetted explanation.
import { packageVersion } from '../../../shared/version';

export interface OAuthDef {
  token_url: string;
  client_id: string;
  grant: 'client_credentials' | 'refresh_token';
  scopes?: string[];
  client_auth: 'basic' | 'post';
}

export type { OAuthSecret } from '../../../shared/credential/oauth-secret';
import type { OAuthSecret } from '../../../shared/credential/oauth-secret';
export { oauthSecretParts } from '../../../shared/credential/oauth-secret';

// application/x-www-form-urlencoded (RFC 6749 Appendix B, as the URL
// Standard serialises it): ASCII letters, digits and *-._ as they are, space
// as "+", every other byte as %XX. Written straight into the output so the
// encoded secret exists only where the caller can wipe it.
function keptAsIs(b: number): boolean {
  return (
    (b >= 0x30 && b <= 0x39) ||
    (b >= 0x41 && b <= 0x5a) ||
    (b >= 0x61 && b <= 0x7a) ||
    b === 0x2a ||
    b === 0x2d ||
    b === 0x2e ||
    b === 0x5f
  );
}

function encodedLength(bytes: Buffer): number {
  let n = 0;
  for (const b of bytes) n += keptAsIs(b) || b === 0x20 ? 1 : 3;
  return n;
}

const HEX = Buffer.from('0123456789ABCDEF', 'latin1');

function encodeInto(bytes: Buffer, out: Buffer, at: number): number {
  for (const b of bytes) {
    if (keptAsIs(b)) out[at++] = b;
    else if (b === 0x20) out[at++] = 0x2b;
    else {
      out[at++] = 0x25;
      out[at++] = HEX[b >> 4] as number;
      out[at++] = HEX[b & 15] as number;
    }
  }
  return at;
}

// name=value pairs joined with "&", names and values form-encoded, in one buffer.
function formBody(pairs: [string, Buffer][]): Buffer {
  const names = pairs.map(([name, value]) => [Buffer.from(name, 'utf8'), value] as const);
  let length = names.length - 1;
  for (const [name, value] of names) length += encodedLength(name) + 1 + encodedLength(value);
  const out = Buffer.alloc(Math.max(length, 0));
  let at = 0;
  names.forEach(([name, value], i) => {
    if (i > 0) out[at++] = 0x26;
    at = encodeInto(name, out, at);
    out[at++] = 0x3d;
    at = encodeInto(value, out, at);
  });
  return out;
}

// RFC 6749 §2.3.1: Basic with the form-encoded client id and secret.
function basicAuthorization(clientId: string, secret: Buffer): string {
  const id = Buffer.from(clientId, 'utf8');
  const userPass = Buffer.alloc(encodedLength(id) + 1 + encodedLength(secret));
  const at = encodeInto(id, userPass, 0);
  userPass[at] = 0x3a;
  encodeInto(secret, userPass, at + 1);
  const header = `Basic ${userPass.toString('base64')}`;
  userPass.fill(0);
  return header;
}

// The token request: POST to def.token_url with a form body. The client
// authenticates with HTTP Basic ("basic") or with client_id and
// client_secret in the body ("post"); a public client (no secret) names
// itself with client_id in the body. The body is a fresh buffer the caller
// wipes once it is sent.
export function oauthTokenRequest(
  def: OAuthDef,
  parts: OAuthSecret,
): { headers: Record<string, string>; body: Buffer } {
  if (def.grant === 'client_credentials' && parts.clientSecret === null) {
    throw new Error('the client credentials grant needs the client secret');
  }
  if (def.grant === 'refresh_token' && parts.refreshToken === null) {
    throw new Error('the refresh token grant needs the refresh token');
  }
  const pairs: [string, Buffer][] = [['grant_type', Buffer.from(def.grant, 'latin1')]];
  if (def.grant === 'refresh_token' && parts.refreshToken !== null) pairs.push(['refresh_token', parts.refreshToken]);
  if (def.scopes !== undefined && def.scopes.length > 0)
    pairs.push(['scope', Buffer.from(def.scopes.join(' '), 'utf8')]);
  const headers: Record<string, string> = {
    accept: 'application/json',
    'content-type': 'application/x-www-form-urlencoded',
    'user-agent': `postern/${packageVersion()}`,
  };
  if (parts.clientSecret === null || def.client_auth === 'post') {
    pairs.push(['client_id', Buffer.from(def.client_id, 'utf8')]);
    if (parts.clientSecret !== null) pairs.push(['client_secret', parts.clientSecret]);
  } else {
    headers.authorization = basicAuthorization(def.client_id, parts.clientSecret);
  }
  return { headers, body: formBody(pairs) };
}

// A token answer is a small JSON object (an access token, perhaps an ID
// token beside it): anything larger is not read.
export const MAX_OAUTH_ANSWER_BYTES = 64 * 1024;
// Tokens go into an Authorization header: visible ASCII, no space, and of a
// size a header can carry.
const TOKEN_SHAPE = /^[\x21-\x7e]+$/;
const MAX_TOKEN_CHARS = 8192;
// expires_in beyond a 32-bit count of seconds (68 years) is not a lifetime.
const MAX_EXPIRES_IN_S = 2 ** 31 - 1;

export type OAuthTokenAnswer =
  | { ok: true; accessToken: string; expiresAt: Date | null; refreshToken: string | null; scope: string | null }
  | { ok: false; code: 'upstream_error'; message: string };

function refused(message: string): OAuthTokenAnswer {
  return { ok: false, code: 'upstream_error', message };
}

// What each OAuth error code (RFC 6749 §5.2, and the registry's common ones)
// means for this request. A code outside this list is not quoted: a server
// could put anything there.
const ERROR_MEANING: Record<string, string> = {
  invalid_request: 'the server found the token request malformed (a parameter missing, repeated or not supported)',
  invalid_client:
    'the client was not authenticated: check client_id, the client secret, and client_auth ("basic" or "post")',
  invalid_grant: 'the refresh token was refused (revoked, expired or already used)',
  unauthorized_client:
    'this client may not use this grant; check the grant of the definition and the client at the server',
  unsupported_grant_type: 'the server does not support this grant',
  invalid_scope: 'the scopes asked for are unknown to the server or more than the client may have; check scopes',
  access_denied: 'the server denied the request',
  server_error: 'the server failed; try again later',
  temporarily_unavailable: 'the server is temporarily unavailable; try again later',
};

// The server's own description is worth showing ("client authentication
// failed"), but only when it is plainly prose: short, RFC 6749's characters,
// no word of 20 characters or more and none mixing letters and digits, so an
// echoed token or secret cannot pass through.
function vettedDescription(d: unknown): string {
  if (typeof d !== 'string' || d.length === 0 || d.length > 200) return '';
  if (!/^[A-Za-z0-9 .,:;'()\-_/?!]+$/.test(d)) return '';
  for (const word of d.split(/[ .,:;'()/?!]+/)) {
    if (word.length >= 20 || (/[A-Za-z]/.test(word) && /[0-9]/.test(word))) return '';
  }
  return ` (server: "${d}")`;
}

function parseJsonObject(body: Buffer): Record<string, unknown> | null {
  if (body.length > MAX_OAUTH_ANSWER_BYTES) return null;
  try {
    const v: unknown = JSON.parse(body.toString('utf8'));
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

function errorAnswer(status: number, body: Buffer): OAuthTokenAnswer {
  const json = parseJsonObject(body);
  const error = json?.error;
  const endpoint = `the OAuth token endpoint answered ${status}`;
  if (typeof error === 'string') {
    const meaning = Object.hasOwn(ERROR_MEANING, error) ? ERROR_MEANING[error] : undefined;
    const named =
      meaning === undefined ? ' with an error code that is not a standard OAuth one' : ` ${error}: ${meaning}`;
    return refused(`${endpoint}${named}${vettedDescription(json?.error_description)}`);
  }
  if (status === 401) return refused(`${endpoint}: ${ERROR_MEANING.invalid_client}`);
  if (status >= 500) return refused(`${endpoint}: the server failed; try again later`);
  return refused(`${endpoint} without an OAuth error (a JSON object with "error"); check token_url`);
}

const KNOWN_TOKEN_TYPES: Record<string, string> = { mac: 'MAC', dpop: 'DPoP', n_a: 'N_A' };

function usableToken(v: unknown): v is string {
  return typeof v === 'string' && v.length > 0 && v.length <= MAX_TOKEN_CHARS && TOKEN_SHAPE.test(v);
}

// A member some servers write as null when they mean "none": read as absent.
function member(json: Record<string, unknown>, name: string): unknown {
  return json[name] === null ? undefined : json[name];
}

// The access token and what comes with it from the endpoint's answer (200),
// or a refusal naming what is wrong.
export function parseOAuthTokenResponse(status: number, body: Buffer, now: Date): OAuthTokenAnswer {
  if (status >= 200 && status < 300 && status !== 200) {
    return refused(`the OAuth token endpoint answered ${status}; a token answer comes with 200 (RFC 6749 §5.1)`);
  }
  if (status >= 300 && status < 400) {
    return refused(`the OAuth token endpoint answered ${status} (a redirect, not followed); check token_url`);
  }
  if (status !== 200) return errorAnswer(status, body);
  const answer = 'the OAuth token answer (200)';
  if (body.length > MAX_OAUTH_ANSWER_BYTES) {
    return refused(`${answer} is over ${MAX_OAUTH_ANSWER_BYTES} bytes; it is not a token answer`);
  }
  const json = parseJsonObject(body);
  if (json === null) return refused(`${answer} is not a JSON object`);
  const accessToken = member(json, 'access_token');
  // Some servers answer an error with 200.
  if (accessToken === undefined && typeof json.error === 'string') return errorAnswer(status, body);
  if (accessToken === undefined) return refused(`${answer} has no "access_token"`);
  if (!usableToken(accessToken)) {
    return refused(
      `${answer} has an "access_token" that is not a usable token (visible ASCII, at most ${MAX_TOKEN_CHARS})`,
    );
  }
  const tokenType = member(json, 'token_type');
  if (tokenType === undefined) return refused(`${answer} has no "token_type"`);
  if (typeof tokenType !== 'string' || tokenType.toLowerCase() !== 'bearer') {
    const lower = typeof tokenType === 'string' ? tokenType.toLowerCase() : '';
    // Own names only: the endpoint chose the text ("constructor" is on every object).
    const known = Object.hasOwn(KNOWN_TOKEN_TYPES, lower) ? KNOWN_TOKEN_TYPES[lower] : undefined;
    const which = known === undefined ? 'a "token_type" other than Bearer' : `"token_type" ${known}`;
    return refused(`${answer} has ${which}; postern sends Bearer tokens only`);
  }
  const expiresIn = member(json, 'expires_in');
  let expiresAt: Date | null = null;
  if (expiresIn !== undefined) {
    if (
      typeof expiresIn !== 'number' ||
      !Number.isInteger(expiresIn) ||
      expiresIn <= 0 ||
      expiresIn > MAX_EXPIRES_IN_S
    ) {
      return refused(`${answer} has an "expires_in" that is not a positive whole number of seconds`);
    }
    expiresAt = new Date(now.getTime() + expiresIn * 1000);
  }
  const refreshToken = member(json, 'refresh_token');
  if (refreshToken !== undefined && !usableToken(refreshToken)) {
    return refused(
      `${answer} has a "refresh_token" that is not a usable token (visible ASCII, at most ${MAX_TOKEN_CHARS})`,
    );
  }
  const scope = member(json, 'scope');
  if (scope !== undefined && typeof scope !== 'string') return refused(`${answer} has a "scope" that is not a string`);
  return {
    ok: true,
    accessToken,
    expiresAt,
    refreshToken: typeof refreshToken === 'string' ? refreshToken : null,
    scope: typeof scope === 'string' ? scope : null,
  };
}
