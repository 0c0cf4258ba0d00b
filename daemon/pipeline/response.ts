// SPEC §6.1 step 9 and §6.4: turn what the upstream sent into what the
// agent gets. In order: undo a Transfer-Encoding other than chunked, then a
// Content-Encoding (capped), drop Set-Cookie
// unless the credential passes it, redact headers and body (over the bytes
// read beyond the cap), then truncate at max_response_body.
import type { HttpCredentialDef } from '../../shared/credential';
import type { HttpResponseReply } from '../../shared/protocol';
import { HEADER_TOKEN } from '../../shared/http-headers';
import type { RawResponse } from './execute-http';
import { parseContentEncoding, parseTransferEncoding, decodeBody } from './decode';
import { Redactor, redact, redactText } from './redact';

export type AgentResponse = HttpResponseReply;

// Text when the type says so (or says nothing) and the bytes are UTF-8;
// anything else goes back as base64, byte for byte.
export function isText(contentType: string | undefined, body: Buffer): boolean {
  const ct = (contentType ?? '').toLowerCase();
  const textual = ct.startsWith('text/') || /json|xml|javascript|x-www-form-urlencoded|charset=/.test(ct);
  if (!textual && ct !== '') return false;
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(body);
  } catch {
    return false;
  }
  return !mostlyControl(text);
}

// JSON writes a control character other than \b \t \n \f \r as \u00XX,
// six bytes for one: a body of them became six times its size in the reply
// (64 replies of 8 MiB took 6.8 GiB). Beyond one such character in 16 the
// body is not text to a reader anyway, and base64 (4/3 of the bytes) is
// returned. ESC is not counted: a terminal's colours (`ls --color`, `git
// log --color`) put one every few characters, and such output is text.
const MOSTLY = 16;
const WIDE_ESCAPE = /[\x00-\x07\x0b\x0e-\x1a\x1c-\x1f]/g;

export function mostlyControl(text: string): boolean {
  const allowed = text.length / MOSTLY;
  let seen = 0;
  WIDE_ESCAPE.lastIndex = 0;
  while (WIDE_ESCAPE.test(text)) if (++seen > allowed) return true;
  return false;
}

// Headers that describe the bytes on the wire rather than the body returned:
// dropped when the coding they name was undone.
const WIRE_HEADERS_WHEN_CONTENT_DECODED = ['content-encoding', 'content-length'];
const WIRE_HEADERS_WHEN_TRANSFER_DECODED = ['transfer-encoding', 'content-length'];

// A header name on the wire is a token (RFC 9110 §5.6.2), and the mark
// "[REDACTED:<credential>]" is not one: where a name is written as an HTTP
// header (the proxy front door), its marks are written "redacted-<credential>"
// (lower case, as undici gives every other name; credential names are
// tokens). Redaction puts nothing else into a name,
// so the result is a token; a name that is not one anyway is left out
// rather than make the whole response unwritable.
const MARK_IN_NAME = /\[REDACTED:([a-z0-9._|-]+)\]/g; // `|` joins the names of covering credentials (a tchar)

function tokenName(shown: string): string | null {
  const name = shown.includes('[') ? shown.replace(MARK_IN_NAME, 'redacted-$1') : shown;
  return HEADER_TOKEN.test(name) ? name : null;
}

// The headers passed on: Set-Cookie only when the credential passes it,
// none of `dropped`, names and values redacted; with `wireNames`, names
// written as tokens (above).
export function shapeHeaders(
  upstream: Record<string, string | string[]>,
  passSetCookie: boolean,
  redactor: Redactor | null,
  dropped: ReadonlySet<string>,
  wireNames = false,
): { headers: Record<string, string | string[]>; redactions: number } {
  let redactions = 0;
  const scrub = (v: string): string => {
    const r = redactText(redactor, v);
    redactions += r.count;
    return r.text;
  };
  // No prototype: a header named `constructor` or `__proto__` is a header.
  const headers: Record<string, string | string[]> = Object.create(null) as Record<string, string | string[]>;
  for (const [name, value] of Object.entries(upstream)) {
    if (name === 'set-cookie' && !passSetCookie) continue;
    if (dropped.has(name)) continue;
    // An upstream may echo the secret as a header name, too.
    const scrubbed = scrub(name);
    const shown = wireNames ? tokenName(scrubbed) : scrubbed;
    if (shown === null) continue;
    const values = Array.isArray(value) ? value.map(scrub) : scrub(value);
    const before = headers[shown];
    headers[shown] = before === undefined ? values : [...[before].flat(), ...[values].flat()];
  }
  return { headers, redactions };
}

export async function shapeResponse(
  raw: RawResponse,
  def: HttpCredentialDef,
  redactor: Redactor | null,
  cap: number,
  readLimit: number,
  host: string,
): Promise<AgentResponse> {
  const transfer = parseTransferEncoding(raw.headers['transfer-encoding'], host);
  const content = parseContentEncoding(raw.headers['content-encoding'], host);
  const decoded = await decodeBody([...transfer, ...content], raw.body, raw.complete, readLimit, host);
  const wire = new Set([
    ...(transfer.length > 0 ? WIRE_HEADERS_WHEN_TRANSFER_DECODED : []),
    ...(content.length > 0 ? WIRE_HEADERS_WHEN_CONTENT_DECODED : []),
  ]);
  const shaped = shapeHeaders(raw.headers, def.pass_set_cookie, redactor, wire);
  const headers = shaped.headers;
  let redactions = shaped.redactions;
  // Decoded data that stops early (compressed input cut by the read limit)
  // may end inside an occurrence: keep only what lies a whole occurrence
  // length before its end.
  const margin = redactor?.maxMatchLength ?? 0;
  const cut = decoded.complete ? cap : Math.min(cap, Math.max(0, decoded.data.length - margin));
  const body = redact(redactor, decoded.data, cut);
  redactions += body.count;
  const truncated = !decoded.complete || body.cut;
  const location = headers['location'];
  const redirect = raw.status >= 300 && raw.status < 400 && typeof location === 'string' ? { location } : null;
  const text = isText(typeof headers['content-type'] === 'string' ? headers['content-type'] : undefined, body.data);
  return {
    status: raw.status,
    headers,
    body: text ? body.data.toString('utf8') : body.data.toString('base64'),
    body_encoding: text ? 'utf8' : 'base64',
    truncated,
    redactions,
    redirect,
  };
}
