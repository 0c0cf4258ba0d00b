// The only place a credential's secret is placed into a request (SPEC §6.1
// step 8): the header form, HTTP Basic, a query parameter, or computed
// (SPEC §13): an AWS Signature V4 over the request, or the access token of
// a GitHub App or an OAuth 2.0 client, obtained just before. The caller
// holds the secret open only around this call and the send. undici takes
// header values as strings, so the injected value exists as a JavaScript
// string for the duration of the send: the one unavoidable copy.
import type { HttpCredentialDef } from '../../shared/credential';
import type { SecretBytes } from '../../shared/secret-bytes';
import type { Target } from './target';
import { headerKey } from '../../shared/http-headers';
import { packageVersion } from '../../shared/version';
import { Refusal } from '../../shared/errors';
import { sha256hex } from '../../shared/crypto';
import { parseAwsSecret, signSigV4 } from './computed/aws-sigv4';
import { oauthSecretParts } from '../../shared/credential/oauth-secret';
import type { AwsResign } from './computed/aws-proxied';

export interface Injected {
  headers: Record<string, string>;
  pathAndQuery: string;
  // What the upstream may echo back: the secret and the whole injected value
  // (e.g. "Bearer …", "user:secret"), for redaction. Wiped by the caller.
  needles: Buffer[];
  // Made for this request alone, and redacted too: an AWS signature. Echoed
  // back, it would let the agent send the same signed request again without
  // postern (AWS takes it for 15 minutes) and without approval or journal.
  // Kept apart from `needles`, whose redactor is cached per credential.
  ownNeedles: Buffer[];
}

// RFC 3986 unreserved characters stay; every other byte is %XX.
function percentEncode(b: Buffer): string {
  let out = '';
  for (const c of b)
    out += /[A-Za-z0-9\-._~]/.test(String.fromCharCode(c))
      ? String.fromCharCode(c)
      : `%${c.toString(16).toUpperCase().padStart(2, '0')}`;
  return out;
}

// The headers sent besides the secret: the agent's, then the credential's
// [headers] the agent did not set, then `User-Agent: postern/<version>` when
// neither set one (some APIs, GitHub's among them, refuse requests without).
// Names are compared as servers compare them: any case, "_" read as "-".
export function requestHeaders(def: HttpCredentialDef, agentHeaders: [string, string][]): Record<string, string> {
  // No prototype: a header named `__proto__` is sent, not lost.
  const headers: Record<string, string> = Object.create(null) as Record<string, string>;
  const set = new Set<string>();
  for (const [k, v] of agentHeaders) {
    headers[k] = v;
    set.add(headerKey(k));
  }
  for (const [k, v] of Object.entries(def.headers ?? {})) {
    if (set.has(headerKey(k))) continue;
    headers[k] = v;
    set.add(headerKey(k));
  }
  if (!set.has('user-agent')) headers['user-agent'] = `postern/${packageVersion()}`;
  return headers;
}

// What of the request injection reads: the method and body (signed by AWS
// Signature V4), and for an AWS client through the proxy what it signed.
export interface InjectRequest {
  method: string;
  body: Buffer | null;
  aws?: AwsResign;
}

// The Host header as undici would send it; signed, so set explicitly.
function hostHeader(target: Target): string {
  const defaultPort = target.scheme === 'https' ? 443 : 80;
  return target.port === defaultPort ? target.host : `${target.host}:${target.port}`;
}

function signAws(
  def: HttpCredentialDef & { inject: { aws_sigv4: { region: string; service: string } } },
  secret: Buffer,
  headers: Record<string, string>,
  target: Target,
  request: InjectRequest,
  ownNeedles: Buffer[],
): void {
  const parsed = parseAwsSecret(secret);
  if (!parsed.ok)
    throw new Refusal(
      'internal_error',
      `the stored secret of credential "${def.name}" is not usable for AWS signing (${parsed.problem}); a human can replace it with \`postern cred update ${def.name} --secret-file FILE\``,
    );
  // A view of the opened secret, wiped with it.
  const keys = parsed.keys;
  const host = hostHeader(target);
  const signed = signSigV4(
    {
      method: request.method,
      host,
      path: target.path,
      query: target.query,
      headers: Object.entries(headers),
      payloadHash: request.aws?.payloadHash ?? sha256hex(request.body ?? Buffer.alloc(0)),
      region: def.inject.aws_sigv4.region,
      service: def.inject.aws_sigv4.service,
      date: new Date(),
      ...(request.aws ? { signedHeaders: request.aws.signedHeaders } : {}),
    },
    keys,
  );
  headers['host'] = host;
  Object.assign(headers, signed.headers);
  ownNeedles.push(Buffer.from(signed.signature, 'latin1'));
}

// What every request of a credential injects that an upstream may echo
// back: the secret, the whole injected value, and for the computed kinds
// the values inside the secret (AWS's secret key and session token, OAuth's
// refresh token and client secret, each alone: the secret holds them on
// separate lines) and the access token in use. Copies, wiped by the caller.
// `token` null with a token kind (none obtained yet): the secret's values.
export function standingNeedles(def: HttpCredentialDef, secret: Buffer, token: string | null): Buffer[] {
  const needles: Buffer[] = [Buffer.from(secret)];
  const inj = def.inject;
  if ('header' in inj && inj.header) {
    const [before, after] = inj.template.split('{secret}') as [string, string];
    needles.push(Buffer.concat([Buffer.from(before, 'utf8'), secret, Buffer.from(after, 'utf8')]));
  } else if ('basic_user' in inj && inj.basic_user !== undefined) {
    needles.push(Buffer.concat([Buffer.from(`${inj.basic_user}:`, 'utf8'), secret]));
  } else if ('aws_sigv4' in inj) {
    const parsed = parseAwsSecret(secret);
    if (parsed.ok) {
      needles.push(Buffer.from(parsed.keys.secretAccessKey));
      if (parsed.keys.sessionToken) needles.push(Buffer.from(parsed.keys.sessionToken, 'latin1'));
    }
  } else if ('github_app' in inj || 'oauth2' in inj) {
    if (token !== null) needles.push(Buffer.from(token, 'latin1'), Buffer.from(`Bearer ${token}`, 'latin1'));
    const parts = 'oauth2' in inj ? oauthSecretParts(secret, inj.oauth2.grant) : null;
    if (parts?.ok)
      for (const part of [parts.refreshToken, parts.clientSecret])
        if (part && part.length > 0) needles.push(Buffer.from(part));
  }
  return needles;
}

// `token`: the access token obtained for this request (GitHub App, OAuth 2.0).
export function inject(
  def: HttpCredentialDef,
  opened: SecretBytes,
  agentHeaders: [string, string][],
  target: Target,
  request: InjectRequest,
  token: string | null = null,
): Injected {
  const secret = opened.bytes;
  const headers = requestHeaders(def, agentHeaders);
  // postern reads responses itself; compression is asked for never.
  headers['accept-encoding'] = 'identity';
  let pathAndQuery = target.path + target.query;
  const inj = def.inject;
  if (('github_app' in inj || 'oauth2' in inj) && token === null)
    throw new Refusal('internal_error', 'no access token was obtained for this request');
  const ownNeedles: Buffer[] = [];
  if ('header' in inj && inj.header) {
    const [before, after] = inj.template.split('{secret}') as [string, string];
    const value = Buffer.concat([Buffer.from(before, 'utf8'), secret, Buffer.from(after, 'utf8')]);
    headers[inj.header.toLowerCase()] = value.toString('latin1');
    value.fill(0);
  } else if ('basic_user' in inj && inj.basic_user !== undefined) {
    const pair = Buffer.concat([Buffer.from(`${inj.basic_user}:`, 'utf8'), secret]);
    headers['authorization'] = `Basic ${pair.toString('base64')}`;
    pair.fill(0);
  } else if ('aws_sigv4' in inj) {
    signAws({ ...def, inject: inj }, secret, headers, target, request, ownNeedles);
  } else if ('github_app' in inj || 'oauth2' in inj) {
    headers['authorization'] = `Bearer ${token}`;
  } else if ('query' in inj && inj.query) {
    const param = `${percentEncode(Buffer.from(inj.query, 'utf8'))}=${percentEncode(secret)}`;
    const q = target.query;
    pathAndQuery = target.path + (q === '' || q === '?' ? `?${param}` : `${q}&${param}`);
  }
  // Copies of the secret's values, made last: nothing above throws after them.
  return { headers, pathAndQuery, needles: standingNeedles(def, secret, token), ownNeedles };
}
