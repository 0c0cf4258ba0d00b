// Headers an agent may not send (SPEC §6.2). They are refused with 400,
// never silently removed: a request that is changed behind the agent's back
// is not the request it asked for, and a refusal tells it what to fix.
//
// Decisions where the SPEC is silent:
// - Names must be HTTP tokens (RFC 9110), at most 128 bytes; matching is
//   case-insensitive and names come back lower-cased, in the given order.
// - Two names that differ only in case, or in "_" against "-", are refused
//   (one header, two values); a forbidden name is forbidden in either
//   spelling (shared/http-headers.ts says why).
// - Values: printable ASCII, space and tab only, at most 16 KiB. Non-ASCII
//   is refused rather than sent as Latin-1 bytes the agent did not mean.
// - At most 100 headers. Values never appear in messages.
import type { HttpCredentialDef } from '../../shared/credential';
import { Refusal } from '../../shared/errors';
import { quote } from '../../shared/credential/text';
import {
  FORBIDDEN_HEADERS,
  HEADER_TOKEN,
  HEADER_VALUE,
  credentialHeaderRows,
  forbiddenHeader,
  headerKey,
} from '../../shared/http-headers';

export { FORBIDDEN_HEADERS, credentialHeaderRows, forbiddenHeader };
export type { ForbiddenHeader } from '../../shared/http-headers';

export const HEADER_LIMITS = { count: 100, nameBytes: 128, valueBytes: 16 * 1024 } as const;

function refuse(message: string): never {
  throw new Refusal('bad_request', message);
}

function checkName(name: string): string {
  if (/[\r\n\0]/.test(name)) refuse(`header name ${quote(name)} contains CR, LF or NUL; remove the header`);
  if (name === '') refuse('headers has an empty header name; remove it');
  if (Buffer.byteLength(name, 'utf8') > HEADER_LIMITS.nameBytes) {
    refuse(`header name ${quote(name)} is longer than ${HEADER_LIMITS.nameBytes} bytes; shorten or remove it`);
  }
  if (!HEADER_TOKEN.test(name)) {
    refuse(
      `header name ${quote(name)} is not a valid HTTP header name (letters, digits and !#$%&'*+.^_\`|~-); fix or remove it`,
    );
  }
  return name.toLowerCase();
}

function checkValue(lower: string, value: unknown): string {
  if (typeof value !== 'string')
    refuse(`header "${lower}" must have a string value; send headers as {"name": "value"}`);
  if (/[\r\n\0]/.test(value)) refuse(`header "${lower}" has a value containing CR, LF or NUL; remove them`);
  if (Buffer.byteLength(value, 'utf8') > HEADER_LIMITS.valueBytes) {
    refuse(`header "${lower}" has a value longer than ${HEADER_LIMITS.valueBytes} bytes; shorten it`);
  }
  if (!HEADER_VALUE.test(value)) {
    refuse(
      `header "${lower}" has a value with a control or non-ASCII character; send printable ASCII only (encode other text as the API documents)`,
    );
  }
  return value;
}

// The agent's headers, checked against the table (and the credential's rows
// when `def` is given): lower-cased names with their values, in order. A
// list (a proxied request's header lines) may name a header twice, which is
// refused as two spellings are.
export function checkAgentHeaders(
  headers: Record<string, string> | readonly [string, string][],
  def?: HttpCredentialDef,
): [string, string][] {
  const entries = Array.isArray(headers) ? headers : Object.entries(headers);
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
    if (seen.has(headerKey(lower)))
      refuse(
        `header "${lower}" is given twice (names are case-insensitive, and servers read "_" as "-"); send it once`,
      );
    seen.add(headerKey(lower));
    out.push([lower, value]);
  }
  return out;
}
