// An HTTP/1.1 request read by the proxy front door (SPEC §11), turned into
// the validated request the pipeline runs. What changes for a request
// through the proxy, and only this: the client's hop-by-hop headers and its
// accept-encoding are removed, not refused; `host` must name the CONNECT
// target; and the credential is designated by its placeholder in its inject
// slot, which is then removed so that injection puts the real secret there.
// Everything else is POST /v1/http's rules (validate.ts, headers.ts,
// target.ts), applied to these parts.
//
// Decisions where the SPEC is silent:
// - content-length and transfer-encoding framed the message on the client's
//   connection, which the front door has read: they are removed too (a
//   content-length that disagrees with the body read is refused), and so is
//   `expect: 100-continue`, which the front door answers itself.
// - Inside a CONNECT the request target must be origin-form ("/path?q");
//   without one it must be an absolute http:// URL (https goes through
//   CONNECT), and `host` must then name that URL's authority.
// - A placeholder is any text of the placeholder shape. One in a header is
//   found in its value, and for Authorization: Basic in the decoded user and
//   password; in the path and query also once percent-decoded; in the body
//   as bytes. Its slot is its own credential's (the one it names): the
//   inject header with exactly the template's value, the Basic password (any
//   user without a placeholder: postern sends the credential's own), or the
//   inject query parameter's whole value. Two credentials designated in one
//   request are refused.
import type { HttpCredentialDef } from '../../shared/credential';
import { Refusal } from '../../shared/errors';
import { headerKey } from '../../shared/http-headers';
import { DEFAULT_PORTS, parseTarget, type Target } from './target';
import { validateRequestParts, type RequestLimits, type UncredentialedRequest } from './validate';
import { isAwsSlot, refusePresigned, resignAws, type AwsResign } from './computed/aws-proxied';

export interface ProxiedParts {
  method: string;
  target: string; // the request line's target, as sent
  headers: readonly [string, string][]; // header lines, in order, as sent
  body: Buffer | null;
  connect: { host: string; port: number } | null; // the CONNECT target (scheme https), or none
}

export type PlaceholderLookup = (value: string) => { credential: string } | 'not-honoured' | null;

export interface ProxiedRequest extends UncredentialedRequest {
  credential: string | null; // designated by its placeholder; null: none
  // An AWS client's request, to be signed again (computed/aws-proxied.ts).
  aws?: AwsResign;
}

// Bounded as credential names are (runs.ts): with an open `+`, text of
// "postern-" repeated made every start run to the end and back (quadratic).
export const PLACEHOLDER = /postern-([a-z0-9][a-z0-9._-]{0,63})-[0-9a-f]{16}/g;

// Removed from the client's headers (the front door's own connection).
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'te', 'trailer', 'upgrade', 'accept-encoding']);
const FRAMING = new Set(['content-length', 'transfer-encoding', 'expect']);

const NOT_HONOURED =
  'is not valid for this process: it belongs to another run, or its run ended (a run ends when its command exits and when the vault is locked, so placeholders from before a lock are void), or its credential was removed (postern cred rm); start the program again under a new `postern run`';

function refuse(message: string): never {
  throw new Refusal('bad_request', message);
}

// The path and query of a request inside a tunnel to host:port. The
// absolute form is taken too when it names the tunnel's own origin (RFC
// 9112 §3.2.2: a server accepts it; Python's urllib sends it when it
// retries with credentials through a proxy); any other origin, or user
// information in it, is refused.
function tunnelPath(target: string, host: string, port: number): string {
  if (target.startsWith('/')) return target;
  const m = /^https:\/\/([^/?#]*)(.*)$/is.exec(target);
  const origin = m?.[1]?.toLowerCase();
  const same = origin === `${host}:${port}`.toLowerCase() || (port === 443 && origin === host.toLowerCase());
  const rest = m?.[2] ?? '';
  if (!same || !(rest === '' || rest.startsWith('/') || rest.startsWith('?')))
    refuse(
      `the request target inside a CONNECT tunnel to ${host}:${port} must be a path ("/...") or a URL of that origin (https://${host}:${port}/...); send the request as the server would receive it`,
    );
  return rest.startsWith('/') ? rest : `/${rest}`;
}

function urlOf(parts: ProxiedParts): string {
  const t = parts.target;
  if (parts.connect) {
    const host = parts.connect.host.includes(':') ? `[${parts.connect.host}]` : parts.connect.host;
    return `https://${host}:${parts.connect.port}${tunnelPath(t, host, parts.connect.port)}`;
  }
  if (!/^http:\/\//i.test(t))
    refuse(
      'a request to the proxy must name an absolute http:// URL, or go through CONNECT for https; set HTTPS_PROXY and HTTP_PROXY to postern',
    );
  return t;
}

// Hop-by-hop and framing headers out; `host` checked against the target
// and removed (postern sets it from the URL).
function clientHeaders(parts: ProxiedParts, target: Target): [string, string][] {
  const listed = new Set<string>();
  for (const [name, value] of parts.headers) {
    if (name.toLowerCase() === 'connection') for (const n of value.split(',')) listed.add(n.trim().toLowerCase());
  }
  const kept: [string, string][] = [];
  let host: string | null = null;
  for (const [name, value] of parts.headers) {
    const lower = name.toLowerCase();
    if (HOP_BY_HOP.has(lower) || lower.startsWith('proxy-') || listed.has(lower)) continue;
    if (lower === 'content-length') {
      if (value.trim() !== String(parts.body?.length ?? 0))
        refuse('header "content-length" does not match the body sent; send the body\'s length');
      continue;
    }
    // The front door undid the chunks, nothing else: a body coded besides
    // ("gzip, chunked") would reach the server still coded, without a word.
    if (lower === 'transfer-encoding' && value.trim().toLowerCase() !== 'chunked')
      refuse(
        'header "transfer-encoding" may only be "chunked": a body coded besides would reach the server still coded; send the body uncoded, or name its coding in content-encoding',
      );
    if (FRAMING.has(lower)) continue;
    if (lower === 'host') {
      if (host !== null) refuse('header "host" is given twice; send it once');
      host = value;
      continue;
    }
    kept.push([name, value]);
  }
  const where = parts.connect ? 'the CONNECT target' : 'the URL';
  if (host === null) refuse(`header "host" is missing; it must name ${where} (${shownAuthority(target)})`);
  if (!namesTarget(host, target))
    refuse(`header "host" must name ${where} (${shownAuthority(target)}); send the request to the host it is for`);
  return kept;
}

// Whether a host header names the target. The target's own authority, as
// parseTarget normalises it, is taken as it is; any other text is parsed
// as an authority alone (nothing that would make it a path, query or
// userinfo) and must read as the same host and port.
function namesTarget(host: string, target: Target): boolean {
  if (host === shownAuthority(target) || (host === target.host && target.port === DEFAULT_PORTS[target.scheme]))
    return true;
  if (/[/?#@\\]/.test(host)) return false;
  try {
    const named = parseTarget(`${target.scheme}://${host.trim()}/`);
    return named.host === target.host && named.port === target.port;
  } catch {
    return false;
  }
}

function shownAuthority(t: Target): string {
  return `${t.host}:${t.port}`;
}

interface Found {
  placeholder: string;
  named: string; // the credential the placeholder's text names
  where: string;
  slot: Slot | null; // the inject slot it sits in, if it is one
  stored: boolean; // a credential of the name it names exists
  // Not in its slot but in the header its credential injects: how that
  // header must read (the refusal says so instead of "remove it").
  expected?: string;
}

type Slot =
  | { kind: 'header'; index: number }
  | { kind: 'basic'; index: number }
  | { kind: 'query'; index: number }
  | { kind: 'aws'; index: number };

// Every placeholder begins with this text (PLACEHOLDER has no flags), so a
// text without it holds none: most of a request is passed over by one
// substring search instead of a regular-expression scan.
const PLACEHOLDER_START = 'postern-';

// PLACEHOLDER's own lastIndex walks the text (matchAll would copy the
// expression on every call); it is left at 0, ready for the next text.
function occurrences(text: string): { placeholder: string; named: string }[] {
  if (!text.includes(PLACEHOLDER_START)) return [];
  const out: { placeholder: string; named: string }[] = [];
  PLACEHOLDER.lastIndex = 0;
  for (let m = PLACEHOLDER.exec(text); m !== null; m = PLACEHOLDER.exec(text))
    out.push({ placeholder: m[0], named: m[1] as string });
  return out;
}

function percentDecoded(text: string): string {
  if (!text.includes('%')) return text;
  return text.replace(/%([0-9a-fA-F]{2})/g, (_m, h: string) => String.fromCharCode(parseInt(h, 16)));
}

function basicParts(value: string): { user: string; password: string } | null {
  const m = /^basic[ \t]+([A-Za-z0-9+/=]+)[ \t]*$/i.exec(value);
  if (!m) return null;
  const decoded = Buffer.from(m[1] as string, 'base64').toString('latin1');
  const colon = decoded.indexOf(':');
  return colon === -1
    ? { user: decoded, password: '' }
    : { user: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}

// How the header `name` must read to carry credential `def`'s placeholder,
// when it is the header that credential injects; else null.
function expectedHeader(def: HttpCredentialDef | undefined, name: string): string | null {
  if (!def) return null;
  const key = headerKey(name);
  if ('github_app' in def.inject)
    return key === 'authorization' ? '"Bearer <placeholder>" or "token <placeholder>"' : null;
  if ('oauth2' in def.inject) return key === 'authorization' ? '"Bearer <placeholder>"' : null;
  if (!('header' in def.inject) || key !== headerKey(def.inject.header)) return null;
  return JSON.stringify(def.inject.template.replace('{secret}', '<placeholder>'));
}

function headerValueIsSlot(
  def: HttpCredentialDef | undefined,
  name: string,
  value: string,
  placeholder: string,
): boolean {
  if (!def) return false;
  // A GitHub App's token goes where clients send a token: gh writes
  // "token …", most others "Bearer …".
  if ('github_app' in def.inject)
    return (
      headerKey(name) === 'authorization' && (value === `Bearer ${placeholder}` || value === `token ${placeholder}`)
    );
  if ('oauth2' in def.inject) return headerKey(name) === 'authorization' && value === `Bearer ${placeholder}`;
  if (!('header' in def.inject)) return false;
  return (
    headerKey(name) === headerKey(def.inject.header) && value === def.inject.template.replace('{secret}', placeholder)
  );
}

// Every placeholder-shaped text in the request, with the slot it sits in.
function findPlaceholders(
  headers: [string, string][],
  target: Target,
  body: Buffer | null,
  defs: (name: string) => HttpCredentialDef | undefined,
): Found[] {
  const found: Found[] = [];
  // `where` is named only for a placeholder found (most texts hold none).
  const add = (
    text: string,
    where: () => string,
    slot: (p: string, def: HttpCredentialDef | undefined) => Slot | null,
    expected?: (def: HttpCredentialDef | undefined) => string | null,
  ) => {
    for (const o of occurrences(text)) {
      const def = defs(o.named);
      const f: Found = { ...o, where: where(), slot: slot(o.placeholder, def), stored: def !== undefined };
      const form = f.slot === null ? expected?.(def) : null;
      if (form) f.expected = form;
      found.push(f);
    }
  };
  const none = () => null;
  headers.forEach(([name, value], index) => {
    // A header whose name and value lack the start holds no placeholder,
    // Basic or not (its base64 is decoded only when it may hold one).
    const lower = name.toLowerCase();
    if (!value.includes(PLACEHOLDER_START) && !name.includes(PLACEHOLDER_START) && lower !== 'authorization') return;
    add(name, () => `the name of header "${lower}"`, none);
    const basic = lower === 'authorization' ? basicParts(value) : null;
    if (basic) {
      add(basic.user, () => 'the Basic user of header "authorization"', none);
      add(
        basic.password,
        () => 'the Basic password of header "authorization"',
        (p, def) => (def && 'basic_user' in def.inject && basic.password === p ? { kind: 'basic', index } : null),
      );
      return;
    }
    add(
      value,
      () => `header "${name.toLowerCase()}"`,
      (p, def) =>
        def && 'aws_sigv4' in def.inject
          ? isAwsSlot(name, value, p)
            ? { kind: 'aws', index }
            : null
          : headerValueIsSlot(def, name, value, p)
            ? { kind: 'header', index }
            : null,
      (def) => expectedHeader(def, name),
    );
  });
  // A text and its percent-decoding (the second only when it differs),
  // those of them that may hold a placeholder.
  const asSentAndDecoded = (text: string): string[] => {
    const decoded = percentDecoded(text);
    const texts = decoded === text ? [text] : [text, decoded];
    return texts.filter((t) => t.includes(PLACEHOLDER_START));
  };
  // In the host it would go out in a DNS query.
  if (target.host.includes(PLACEHOLDER_START)) add(target.host, () => 'the host', none);
  for (const text of asSentAndDecoded(target.path)) add(text, () => 'the URL path', none);
  const pairs = target.query.length > 1 ? target.query.slice(1).split('&') : [];
  pairs.forEach((pair, index) => {
    const eq = pair.indexOf('=');
    const name = eq === -1 ? pair : pair.slice(0, eq);
    const value = eq === -1 ? '' : pair.slice(eq + 1);
    for (const text of asSentAndDecoded(name)) add(text, () => 'a query parameter name', none);
    const decodedName = percentDecoded(name.replace(/\+/g, ' '));
    for (const text of asSentAndDecoded(value)) {
      add(
        text,
        () => `query parameter "${decodedName}"`,
        (p, def) =>
          def && 'query' in def.inject && decodedName === def.inject.query && percentDecoded(value) === p
            ? { kind: 'query', index }
            : null,
      );
    }
  });
  // The body as bytes: looked at as text only when it holds the start.
  if (body?.includes(PLACEHOLDER_START)) add(body.toString('latin1'), () => 'the body', none);
  return found;
}

// The one credential the request designates, checked: every placeholder in
// its slot and honoured, none elsewhere.
function designation(found: Found[], lookup: PlaceholderLookup): { credential: string; slot: Slot } | null {
  let chosen: { credential: string; slot: Slot } | null = null;
  for (const f of found) {
    // A placeholder of no stored credential: never one, or removed since
    // (its placeholders stopped resolving then).
    if (!f.stored) refuse(`the placeholder in ${f.where} ${NOT_HONOURED}`);
    if (!f.slot && f.expected)
      refuse(
        `a placeholder is in ${f.where}, but not as its credential "${f.named}" injects it: the header must read exactly ${f.expected} (case and spacing included)`,
      );
    if (!f.slot)
      refuse(
        `a placeholder is in ${f.where}; postern puts a secret only where its credential's inject form does (its header, the Basic password or its query parameter), never into content: remove it`,
      );
    const r = lookup(f.placeholder);
    if (r === null || r === 'not-honoured') refuse(`this placeholder ${NOT_HONOURED}`);
    if (r.credential !== f.named) refuse(`this placeholder ${NOT_HONOURED}`);
    if (chosen && chosen.credential !== r.credential)
      refuse('the request carries placeholders of two credentials; use one credential per request');
    chosen = { credential: r.credential, slot: f.slot };
  }
  return chosen;
}

function withoutQueryPair(query: string, index: number): string {
  const pairs = query.slice(1).split('&');
  pairs.splice(index, 1);
  return pairs.length === 0 ? '' : `?${pairs.join('&')}`;
}

export function proxiedRequest(
  parts: ProxiedParts,
  limits: RequestLimits,
  lookup: PlaceholderLookup,
  defs: (name: string) => HttpCredentialDef | undefined,
): ProxiedRequest {
  const url = urlOf(parts);
  let target: Target;
  try {
    target = parseTarget(url);
  } catch (e) {
    if (e instanceof Refusal) refuse(e.message.replace(/^url /, 'the request target '));
    throw e;
  }
  let headers = clientHeaders(parts, target);
  const found = findPlaceholders(headers, target, parts.body, defs);
  if (found.some((f) => f.where.includes('query'))) refusePresigned(target.query);
  const chosen = designation(found, lookup);
  let sentUrl = url;
  let aws: AwsResign | undefined;
  if (chosen?.slot.kind === 'aws') {
    const def = defs(chosen.credential);
    if (!def || !('aws_sigv4' in def.inject)) refuse(`this placeholder ${NOT_HONOURED}`);
    refusePresigned(target.query);
    ({ headers, aws } = resignAws(headers, chosen.slot.index, parts.body, def.inject.aws_sigv4));
  } else if (chosen?.slot.kind === 'query') {
    const q = withoutQueryPair(target.query, chosen.slot.index);
    sentUrl = `${target.scheme}://${url.slice(url.indexOf('//') + 2).split(/[/?]/)[0]}${target.path}${q}`;
  } else if (chosen) {
    const index = chosen.slot.index;
    headers = headers.filter((_h, i) => i !== index);
  }
  const req = validateRequestParts(
    { method: parts.method, url: sentUrl, ...(sentUrl === url ? { parsed: target } : {}), headers, body: parts.body },
    limits,
  );
  return { ...req, credential: chosen?.credential ?? null, ...(aws ? { aws } : {}) };
}
