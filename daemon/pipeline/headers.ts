// Headers an agent may not send (SPEC §6.2). They are refused with 400,
// never silently removed: a request that is changed behind the agent's back
// is not the request it asked for, and a refusal tells it what to fix.
//
// Decisions where the SPEC is silent:
// - Names must be HTTP tokens (RFC 9110), at most 128 bytes; matching is
//   case-insensitive and names come back lower-cased, in the given order.
// - Two names that differ only in case are refused (one header, two values).
// - Values: printable ASCII, space and tab only, at most 16 KiB. Non-ASCII
//   is refused rather than sent as Latin-1 bytes the agent did not mean.
// - At most 100 headers. Values never appear in messages.
import type { HttpCredentialDef } from '../../shared/credential';
import { injectForm } from '../../shared/credential';
import { Refusal } from '../../shared/errors';
import { quote } from '../../shared/credential/text';

export interface ForbiddenHeader {
  name: string; // lower case
  prefix: boolean; // true: every name starting with `name`
  reason: string;
}

const FRAMING = 'postern frames the request itself (it could split or smuggle a request)';
const HOP = 'it is a hop-by-hop header postern manages on its own connection';
const ROUTING = 'it tells servers and proxies where the request came from or where to route it, which a policy cannot check';
const OVERRIDE = 'it makes servers treat the request as another method or URL than the one the policy allowed';

export const FORBIDDEN_HEADERS: readonly ForbiddenHeader[] = [
  { name: 'host', prefix: false, reason: 'postern sets Host from the URL the policy checked' },
  { name: 'content-length', prefix: false, reason: FRAMING },
  { name: 'transfer-encoding', prefix: false, reason: FRAMING },
  { name: 'connection', prefix: false, reason: HOP },
  { name: 'upgrade', prefix: false, reason: 'it would switch the connection to another protocol no rule describes' },
  { name: 'te', prefix: false, reason: HOP },
  { name: 'trailer', prefix: false, reason: FRAMING },
  { name: 'keep-alive', prefix: false, reason: HOP },
  { name: 'expect', prefix: false, reason: 'postern sends the body at once; 100-continue handling is its own' },
  { name: 'accept-encoding', prefix: false, reason: 'postern asks for identity so it can redact and cap the response' },
  { name: 'proxy-', prefix: true, reason: 'proxy headers are for proxies, and Proxy-Authorization could carry credentials' },
  { name: 'forwarded', prefix: false, reason: ROUTING },
  { name: 'x-forwarded-', prefix: true, reason: ROUTING },
  { name: 'x-real-ip', prefix: false, reason: ROUTING },
  { name: 'x-http-method-override', prefix: false, reason: OVERRIDE },
  { name: 'x-http-method', prefix: false, reason: OVERRIDE },
  { name: 'x-method-override', prefix: false, reason: OVERRIDE },
  { name: 'x-original-url', prefix: false, reason: OVERRIDE },
  { name: 'x-rewrite-url', prefix: false, reason: OVERRIDE },
];

export const HEADER_LIMITS = { count: 100, nameBytes: 128, valueBytes: 16 * 1024 } as const;

// RFC 9110 token.
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const VALUE = /^[\t\x20-\x7e]*$/;

// The rows that depend on the credential: the header it injects into, and
// Authorization when it uses HTTP Basic.
export function credentialHeaderRows(def: HttpCredentialDef): ForbiddenHeader[] {
  const inject = def.inject;
  const form = injectForm(inject);
  if ('header' in inject) {
    return [{ name: inject.header.toLowerCase(), prefix: false, reason: `credential ${def.name} injects its secret into it` }];
  }
  if (form === 'basic') {
    return [{ name: 'authorization', prefix: false, reason: `credential ${def.name} sends its secret as HTTP Basic authorization` }];
  }
  return [];
}

export function forbiddenHeader(lowerName: string, rows: readonly ForbiddenHeader[]): ForbiddenHeader | undefined {
  return rows.find((r) => (r.prefix ? lowerName.startsWith(r.name) : lowerName === r.name));
}

function refuse(message: string): never {
  throw new Refusal('bad_request', message);
}

function checkName(name: string): string {
  if (/[\r\n\0]/.test(name)) refuse(`header name ${quote(name)} contains CR, LF or NUL; remove the header`);
  if (name === '') refuse('headers has an empty header name; remove it');
  if (Buffer.byteLength(name, 'utf8') > HEADER_LIMITS.nameBytes) {
    refuse(`header name ${quote(name)} is longer than ${HEADER_LIMITS.nameBytes} bytes; shorten or remove it`);
  }
  if (!TOKEN.test(name)) {
    refuse(`header name ${quote(name)} is not a valid HTTP header name (letters, digits and !#$%&'*+.^_\`|~-); fix or remove it`);
  }
  return name.toLowerCase();
}

function checkValue(lower: string, value: unknown): string {
  if (typeof value !== 'string') refuse(`header "${lower}" must have a string value; send headers as {"name": "value"}`);
  if (/[\r\n\0]/.test(value)) refuse(`header "${lower}" has a value containing CR, LF or NUL; remove them`);
  if (Buffer.byteLength(value, 'utf8') > HEADER_LIMITS.valueBytes) {
    refuse(`header "${lower}" has a value longer than ${HEADER_LIMITS.valueBytes} bytes; shorten it`);
  }
  if (!VALUE.test(value)) {
    refuse(`header "${lower}" has a value with a control or non-ASCII character; send printable ASCII only (encode other text as the API documents)`);
  }
  return value;
}

// The agent's headers, checked against the table (and the credential's rows
// when `def` is given): lower-cased names with their values, in order.
export function checkAgentHeaders(headers: Record<string, string>, def?: HttpCredentialDef): [string, string][] {
  const entries = Object.entries(headers);
  if (entries.length > HEADER_LIMITS.count) {
    refuse(`headers has ${entries.length} headers; send at most ${HEADER_LIMITS.count}`);
  }
  const rows = def ? [...FORBIDDEN_HEADERS, ...credentialHeaderRows(def)] : FORBIDDEN_HEADERS;
  const seen = new Set<string>();
  const out: [string, string][] = [];
  for (const [name, value] of entries) {
    const lower = checkName(name);
    const row = forbiddenHeader(lower, rows);
    if (row) refuse(`header "${lower}" may not be sent: ${row.reason}; remove it`);
    checkValue(lower, value);
    if (seen.has(lower)) refuse(`header "${lower}" is given twice (names are case-insensitive); send it once`);
    seen.add(lower);
    out.push([lower, value]);
  }
  return out;
}
