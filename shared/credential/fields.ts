// Checks and normal forms of single definition fields (SPEC §4). Each takes
// the raw value and returns its normalised value or the problem; the zod
// schemas in shape.ts wire them to their paths.
import ipaddr from 'ipaddr.js';
import { Check, ok, bad, hasInvisible, quote } from './text';
import { pathFormProblem } from '../path-form';
import { FORBIDDEN_HEADERS, HEADER_TOKEN, HEADER_VALUE, forbiddenHeader } from '../http-headers';

export const NAME_PATTERN = /^[a-z0-9][a-z0-9._-]{0,63}$/;
export const MAX_DESCRIPTION_LENGTH = 500;

export function checkName(name: string): Check<string> {
  if (NAME_PATTERN.test(name)) return ok(name);
  if (name === '') return bad('is empty; use lower-case letters, digits, ".", "_" and "-", e.g. "github"');
  if (name.length > 64) return bad(`is ${name.length} characters long; at most 64`);
  return bad(
    `${quote(name)} is not a valid name: 1 to 64 characters of a-z, 0-9, ".", "_", "-", starting with a letter or digit`,
  );
}

export function checkDescription(text: string): Check<string> {
  if (text.length > MAX_DESCRIPTION_LENGTH) return bad(`is longer than ${MAX_DESCRIPTION_LENGTH} characters`);
  if (hasInvisible(text)) {
    return bad('contains a control or invisible character (newline, tab, bidi, zero-width); write one plain line');
  }
  return ok(text);
}

// Request budgets: "N/unit". Units are spelt out or abbreviated; the normal
// form uses the abbreviations of the SPEC's example ("120/min").
export const RATE_UNITS: Readonly<Record<string, { unit: string; ms: number }>> = {
  s: { unit: 'sec', ms: 1000 },
  sec: { unit: 'sec', ms: 1000 },
  second: { unit: 'sec', ms: 1000 },
  m: { unit: 'min', ms: 60_000 },
  min: { unit: 'min', ms: 60_000 },
  minute: { unit: 'min', ms: 60_000 },
  h: { unit: 'hour', ms: 3_600_000 },
  hour: { unit: 'hour', ms: 3_600_000 },
  d: { unit: 'day', ms: 86_400_000 },
  day: { unit: 'day', ms: 86_400_000 },
};
export const MAX_RATE_COUNT = 1_000_000;

export interface Rate {
  count: number;
  per_ms: number;
}

// A normalised or raw rate as numbers; null when it is not a valid rate.
export function parseRate(text: string): Rate | null {
  const m = /^([0-9]{1,7})\/([a-z]+)$/.exec(text);
  if (!m) return null;
  const count = Number(m[1]);
  const unit = RATE_UNITS[m[2] as string];
  if (!unit || count < 1 || count > MAX_RATE_COUNT) return null;
  return { count, per_ms: unit.ms };
}

export function checkRate(text: string): Check<string> {
  const rate = parseRate(text);
  const unit = /\/([a-z]+)$/.exec(text)?.[1];
  if (!rate || unit === undefined) {
    return bad(
      `${quote(text)} is not a rate; write "N/unit" with N from 1 to ${MAX_RATE_COUNT} and unit sec, min, hour or day, e.g. "120/min"`,
    );
  }
  return ok(`${rate.count}/${(RATE_UNITS[unit] as { unit: string }).unit}`);
}

const DOTTED_QUAD =
  /^(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$/;

// A CIDR, normalised to its network address ("10.1.2.3/8" → "10.0.0.0/8",
// IPv6 compressed in lower case). An IPv4-mapped IPv6 range
// (::ffff:a.b.c.d/96+n) becomes the IPv4 range it maps, because addresses
// that embed IPv4 are judged as that IPv4 address (SPEC §6.2).
export function checkCidr(text: string): Check<string> {
  const hint = 'write a CIDR such as "127.0.0.1/32", "10.0.0.0/8" or "fd00::/8"';
  const m = /^([^/]+)\/(0|[1-9][0-9]{0,2})$/.exec(text);
  if (!m) return bad(`${quote(text)} is not a CIDR; ${hint}`);
  const address = m[1] as string;
  if (address.includes('%')) return bad(`${quote(text)}: zone ids ("%...") are not allowed`);
  if (!address.includes(':') && !DOTTED_QUAD.test(address)) {
    return bad(`${quote(text)}: the address must be four decimal numbers without leading zeros; ${hint}`);
  }
  let parsed: [ipaddr.IPv4 | ipaddr.IPv6, number];
  try {
    parsed = ipaddr.parseCIDR(text);
  } catch {
    return bad(`${quote(text)} is not a valid CIDR (address or prefix length out of range); ${hint}`);
  }
  const [addr, prefix] = parsed;
  if (addr.kind() === 'ipv4') {
    return ok(`${ipaddr.IPv4.networkAddressFromCIDR(text).toString()}/${prefix}`);
  }
  const v6 = addr as ipaddr.IPv6;
  if (v6.isIPv4MappedAddress() && prefix >= 96) {
    const v4 = `${v6.toIPv4Address().toString()}/${prefix - 96}`;
    return ok(`${ipaddr.IPv4.networkAddressFromCIDR(v4).toString()}/${prefix - 96}`);
  }
  return ok(`${ipaddr.IPv6.networkAddressFromCIDR(text).toRFC5952String()}/${prefix}`);
}

// RFC 9110 token: header names and methods.
const TOKEN = HEADER_TOKEN;

// A header postern manages itself or that an agent may not send (SPEC §6.2)
// cannot carry the secret: a secret placed in one would be framing, routing
// or a forwarding hint.
export function checkHeaderName(name: string): Check<string> {
  if (name === '') return bad('is empty; name the header, e.g. "Authorization"');
  if (name.length > 128) return bad('is longer than 128 characters');
  if (!TOKEN.test(name))
    return bad(`${quote(name)} is not a valid HTTP header name (letters, digits and !#$%&'*+.^_\`|~-)`);
  const lower = name.toLowerCase();
  if (forbiddenHeader(lower, FORBIDDEN_HEADERS)) {
    return bad(`${quote(lower)} cannot carry a secret; use the header the API documents, e.g. "Authorization"`);
  }
  return ok(lower);
}

// `[headers]`: request headers sent unless the agent sets them (SPEC §4).
// The same names as an agent may send (no header postern manages), values
// of printable ASCII sent as written; at most HEADERS_MAX of them.
export const HEADERS_MAX = 32;
const HEADER_VALUE_MAX = 4096;

export function checkDefaultHeaderName(name: string): Check<string> {
  if (name === '') return bad('is empty; name the header, e.g. User-Agent = "acme-agent"');
  if (name.length > 128) return bad('is longer than 128 characters');
  if (!TOKEN.test(name))
    return bad(`${quote(name)} is not a valid HTTP header name (letters, digits and !#$%&'*+.^_\`|~-)`);
  const row = forbiddenHeader(name, FORBIDDEN_HEADERS);
  if (row) return bad(`cannot be set: ${row.reason}; remove it`);
  return ok(name.toLowerCase());
}

export function checkDefaultHeaderValue(value: string): Check<string> {
  if (value.length > HEADER_VALUE_MAX) return bad(`is longer than ${HEADER_VALUE_MAX} characters`);
  if (!HEADER_VALUE.test(value))
    return bad('must be printable ASCII (space and tab allowed); encode other text as the API documents');
  if (value.includes(SECRET_PLACEHOLDER)) {
    return bad(
      `contains ${SECRET_PLACEHOLDER}, but [headers] values are sent as written; the secret goes only where [inject] puts it`,
    );
  }
  return ok(value);
}

export const SECRET_PLACEHOLDER = '{secret}';

// Header values travel as visible ASCII; anything else would be refused by
// the HTTP stack at request time or mean different bytes to different peers.
export function checkTemplate(template: string): Check<string> {
  if (/[\r\n\0]/.test(template)) return bad('must not contain CR, LF or NUL');
  if (!/^[\x20-\x7e\t]*$/.test(template)) return bad('may contain only printable ASCII, spaces and tabs');
  if (template.length > 1024) return bad('is longer than 1024 characters');
  const count = template.split(SECRET_PLACEHOLDER).length - 1;
  if (count !== 1) {
    return bad(
      `must contain ${SECRET_PLACEHOLDER} exactly once (found ${count === 0 ? 'none; it is case-sensitive' : count}), e.g. "Bearer {secret}"`,
    );
  }
  return ok(template);
}

export function checkBasicUser(user: string): Check<string> {
  if (user.includes(':')) return bad('must not contain ":" (it separates user and password in HTTP Basic)');
  if (hasInvisible(user)) return bad('contains a control or invisible character');
  if (user.length > 256) return bad('is longer than 256 characters');
  return ok(user);
}

// Query parameter names are limited to characters that need no encoding.
export function checkQueryName(name: string): Check<string> {
  if (name === '') return bad('is empty; name the query parameter, e.g. "api_key"');
  if (name.length > 128) return bad('is longer than 128 characters');
  if (!/^[A-Za-z0-9._~-]+$/.test(name)) return bad(`${quote(name)}: use only letters, digits, ".", "_", "~" and "-"`);
  return ok(name);
}

// TRACE/TRACK echo the request, injected secret included, back to the
// caller; CONNECT opens a tunnel no rule can describe.
export const REFUSED_METHODS: readonly string[] = ['CONNECT', 'TRACE', 'TRACK'];

export function checkMethod(method: string): Check<string> {
  if (method === '*') return bad('"*" is not a method; list the methods the rule allows, e.g. ["GET", "POST"]');
  if (method === '' || method.length > 32 || !TOKEN.test(method)) {
    return bad(`${quote(method)} is not an HTTP method (one word of letters, e.g. "GET")`);
  }
  const upper = method.toUpperCase();
  if (REFUSED_METHODS.includes(upper))
    return bad(`${upper} is not allowed: it can expose the injected secret or bypass the rules`);
  return ok(upper);
}

// Characters a path can carry unencoded (RFC 3986 pchar and "/"); "*" is the
// rule wildcard, so a literal "*" cannot be expressed.
const PATH_CHARS = /^[A-Za-z0-9\-._~!$&'()*+,;=:@/%]*$/;

export function checkPathRule(path: string): Check<string> {
  if (path === '') return bad('is empty; write a path starting with "/", e.g. "/*"');
  if (!path.startsWith('/')) return bad(`${quote(path)} must start with "/"`);
  if (path.length > 2048) return bad('is longer than 2048 characters');
  if (/[?#]/.test(path)) return bad(`${quote(path)}: rules match the path only; remove "?" or "#" and what follows`);
  if (/%(?:2f|2e|5c)/i.test(path)) {
    return bad(
      `${quote(path)} contains an encoded "/", "." or "\\" (%2F, %2E, %5C); requests with them are refused, so the rule could never match`,
    );
  }
  if (path.includes('\\')) return bad(`${quote(path)} contains "\\"; use "/"`);
  if (path.includes('//')) return bad(`${quote(path)} contains "//"`);
  if (path.split('/').some((segment) => segment === '.' || segment === '..')) {
    return bad(`${quote(path)} contains a "." or ".." segment`);
  }
  if (!PATH_CHARS.test(path)) {
    return bad(
      `${quote(path)} contains a character that is sent percent-encoded (space, quote, non-ASCII...); write it encoded, e.g. "%20"`,
    );
  }
  if (/%(?![0-9A-Fa-f]{2})/.test(path)) return bad(`${quote(path)} has a "%" not followed by two hex digits`);
  // The forms some origin reads as another path ("..;", "%252E", "%C0%AE",
  // "%EF%BC%8E"): requests with them are refused, as above.
  const form = pathFormProblem(path);
  if (form) {
    return bad(
      `${quote(path)}: segment ${quote(form.segment)} ${form.problem}; requests with it are refused, so the rule could never match`,
    );
  }
  return ok(path);
}

// `ssh-keygen -lf` prints "SHA256:" and the unpadded base64 of 32 bytes.
export function checkHostKey(text: string): Check<string> {
  const hint =
    'write the fingerprint as `ssh-keygen -lf <host key>.pub` prints it, e.g. "SHA256:" followed by 43 base64 characters (ssh-keyscan HOST | ssh-keygen -lf -)';
  const m = /^SHA256:([A-Za-z0-9+/]{43})$/.exec(text);
  if (!m) {
    if (/^SHA256:.*=$/.test(text)) return bad(`${quote(text)} has base64 padding; remove the trailing "="`);
    if (/^MD5:/i.test(text) || /^([0-9a-f]{2}:){15}[0-9a-f]{2}$/i.test(text))
      return bad(`MD5 fingerprints are not accepted; ${hint}`);
    return bad(`${quote(text)} is not a SHA256 fingerprint; ${hint}`);
  }
  const b64 = m[1] as string;
  // The last character carries 2 unused bits, which must be zero in the
  // canonical encoding; otherwise two spellings would name one key.
  if (Buffer.from(b64, 'base64').toString('base64').replace(/=+$/, '') !== b64) {
    return bad(
      `${quote(text)} is not a canonical base64 encoding of a 32-byte hash; copy it again from ssh-keygen -lf`,
    );
  }
  return ok(text);
}

const SSH_USER = /^[A-Za-z0-9._@\\$][A-Za-z0-9._@\\$-]{0,63}$/;

export function checkSshUser(user: string): Check<string> {
  if (user === '') return bad('is empty; name the remote user, e.g. user = "deploy"');
  if (!SSH_USER.test(user)) {
    return bad(
      `${quote(user)}: use 1 to 64 characters of letters, digits, ".", "_", "-", "@", "\\", "$", not starting with "-"`,
    );
  }
  return ok(user);
}
