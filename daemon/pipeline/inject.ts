// The only place a credential's secret is placed into a request (SPEC §6.1
// step 8): the header form, HTTP Basic, or a query parameter. The caller
// holds the secret open only around this call and the send. undici takes
// header values as strings, so the injected value exists as a JavaScript
// string for the duration of the send: the one unavoidable copy.
import type { HttpCredentialDef } from '../../shared/credential';
import type { SecretBytes } from '../../shared/secret-bytes';
import type { Target } from './target';
import { headerKey } from '../../shared/http-headers';
import { packageVersion } from '../../shared/version';

export interface Injected {
  headers: Record<string, string>;
  pathAndQuery: string;
  // What the upstream may echo back: the secret and the whole injected value
  // (e.g. "Bearer …", "user:secret"), for redaction. Wiped by the caller.
  needles: Buffer[];
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
  const headers: Record<string, string> = {};
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

export function inject(
  def: HttpCredentialDef,
  opened: SecretBytes,
  agentHeaders: [string, string][],
  target: Target,
): Injected {
  const secret = opened.bytes;
  const headers = requestHeaders(def, agentHeaders);
  // postern reads responses itself; compression is asked for never.
  headers['accept-encoding'] = 'identity';
  let pathAndQuery = target.path + target.query;
  const needles: Buffer[] = [Buffer.from(secret)];
  const inj = def.inject;
  if ('header' in inj && inj.header) {
    const [before, after] = inj.template.split('{secret}') as [string, string];
    const value = Buffer.concat([Buffer.from(before, 'utf8'), secret, Buffer.from(after, 'utf8')]);
    headers[inj.header.toLowerCase()] = value.toString('latin1');
    needles.push(value);
  } else if ('basic_user' in inj && inj.basic_user !== undefined) {
    const pair = Buffer.concat([Buffer.from(`${inj.basic_user}:`, 'utf8'), secret]);
    headers['authorization'] = `Basic ${pair.toString('base64')}`;
    needles.push(pair);
  } else if ('query' in inj && inj.query) {
    const param = `${percentEncode(Buffer.from(inj.query, 'utf8'))}=${percentEncode(secret)}`;
    const q = target.query;
    pathAndQuery = target.path + (q === '' || q === '?' ? `?${param}` : `${q}&${param}`);
  }
  return { headers, pathAndQuery, needles };
}
