// Step 1 of POST /v1/http (SPEC §6.1): the agent's JSON, checked field by
// field into a typed request. Every problem is reported at once, each naming
// its field and what to do; nothing of the input is echoed but short,
// quoted field values (never a body or a header value).
//
// Decisions where the SPEC is silent:
// - The JSON must be UTF-8 (invalid bytes refused, not replaced) and one
//   object; a byte-order mark is ignored.
// - `body` is UTF-8 text and must be well-formed Unicode (an unpaired
//   surrogate would be sent as U+FFFD, i.e. other bytes than asked); binary
//   goes in `body_base64`: standard alphabet, padded, canonical, no
//   whitespace. `"body": ""` is an empty body; no field is no body. A body is
//   allowed with any method.
// - `method` is upper-cased; at most 32 characters.
// - `idempotency_key`: 1–128 visible ASCII characters (0x21–0x7E, no space).
// - `timeout_ms`: a whole number of milliseconds, 1 to max_timeout.
// - `reason` (also for /v1/ssh): the agent's words for the human, at most
//   200 characters (Unicode code points), well-formed; any character is
//   accepted, the card shows it escaped and marked as the agent's, and the
//   journal records it. It is never a decision input and is not part of the
//   idempotency hash.
// - Problems found in the shape are reported as bad_request before the body
//   size is judged (413 body_too_large only for an otherwise valid request).
import { z } from 'zod';
import { Refusal, Problem } from '../../shared/errors';
import { REFUSED_METHODS } from '../../shared/credential/fields';
import { HEADER_TOKEN } from '../../shared/http-headers';
import { quote } from '../../shared/credential/text';
import {
  Check,
  RequestLimits,
  bad,
  badRequest,
  cachedBy,
  checkBody,
  checkBodyBase64,
  checkCredential,
  checkReason,
  checkTimeout,
  decodeBody,
  field,
  isObject,
  issueProblems,
  ok,
  tooLarge,
} from './validate-fields';

export type { RequestLimits } from './validate-fields';
export { MAX_REASON_LENGTH } from './validate-fields';
export { validateSshRequest, SSH_REQUEST_FIELDS, MAX_COMMAND_LENGTH } from './validate-ssh';
export type { SshRequest } from './validate-ssh';
import { parseTarget, Target } from './target';
import { checkAgentHeaders } from './headers';

export interface HttpRequest {
  credential: string;
  method: string; // upper-cased token
  target: Target;
  headers: [string, string][]; // checked against the table, not yet against the credential
  rawHeaders: Record<string, string>;
  body: Buffer | null;
  timeoutMs: number | null;
  idempotencyKey: string | null;
  reason: string | null;
}

export const HTTP_REQUEST_FIELDS = [
  'credential',
  'method',
  'url',
  'headers',
  'body',
  'body_base64',
  'timeout_ms',
  'idempotency_key',
  'reason',
] as const;

const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,128}$/;
const MAX_METHOD_LENGTH = 32;

function checkMethod(v: unknown): Check<string> {
  if (v === undefined) return bad('is required; give the HTTP method, e.g. "GET"');
  if (typeof v !== 'string') return bad('must be a string, e.g. "GET"');
  if (v.length > MAX_METHOD_LENGTH || !HEADER_TOKEN.test(v)) {
    return bad(`${quote(v)} is not an HTTP method; give one word such as "GET" or "POST"`);
  }
  const upper = v.toUpperCase();
  if (REFUSED_METHODS.includes(upper)) {
    return bad(
      `${upper} is not allowed (it can expose the injected secret or open a tunnel no rule describes); use another method`,
    );
  }
  return ok(upper);
}

function checkUrl(v: unknown): Check<Target> {
  if (v === undefined) return bad('is required; give an absolute http or https URL');
  if (typeof v !== 'string') return bad('must be a string, e.g. "https://api.example.com/v1/items"');
  try {
    return ok(parseTarget(v));
  } catch (e) {
    if (e instanceof Refusal) return bad(e.message.replace(/^url /, ''));
    throw e;
  }
}

interface Headers {
  list: [string, string][];
  raw: Record<string, string>;
}

function checkHeaders(v: unknown): Check<Headers> {
  if (!isObject(v))
    return bad('must be an object of header names and string values, e.g. {"accept": "application/json"}');
  for (const [name, value] of Object.entries(v)) {
    if (typeof value !== 'string')
      return bad(`header ${quote(name)} must have a string value; send headers as {"name": "value"}`);
  }
  const raw = Object.fromEntries(Object.entries(v)) as Record<string, string>;
  try {
    return ok({ list: checkAgentHeaders(raw), raw });
  } catch (e) {
    if (e instanceof Refusal) return bad(e.message);
    throw e;
  }
}

function checkIdempotencyKey(v: unknown): Check<string> {
  if (typeof v !== 'string' || !IDEMPOTENCY_KEY.test(v)) {
    return bad('must be 1 to 128 visible ASCII characters (no spaces), e.g. a UUID; fix it or omit it');
  }
  return ok(v);
}

const schemaFor = cachedBy(buildSchema);

function buildSchema(limits: RequestLimits) {
  return z.strictObject({
    credential: field(checkCredential),
    method: field(checkMethod),
    url: field(checkUrl),
    // An absent optional field is skipped by zod, not checked: the
    // defaults are filled in by validateHttpRequest.
    headers: field(checkHeaders).optional(),
    body: field(checkBody).optional(),
    body_base64: field(checkBodyBase64).optional(),
    timeout_ms: field(checkTimeout(limits.maxTimeout)).optional(),
    idempotency_key: field(checkIdempotencyKey).optional(),
    reason: field(checkReason).optional(),
  });
}

export function validateHttpRequest(json: unknown, limits: RequestLimits): HttpRequest {
  if (!isObject(json))
    throw badRequest([
      { path: '', message: 'the request must be a JSON object with fields credential, method, url, ...' },
    ]);
  const parsed = schemaFor(limits).safeParse(json);
  const problems: Problem[] = parsed.success
    ? []
    : parsed.error.issues.flatMap((i) => issueProblems(i, HTTP_REQUEST_FIELDS));
  if ('body' in json && 'body_base64' in json && json.body !== undefined && json.body_base64 !== undefined) {
    problems.push({
      path: 'body, body_base64',
      message: 'both are given; send one: "body" for UTF-8 text or "body_base64" for bytes',
    });
  }
  if (problems.length > 0 || !parsed.success) throw badRequest(problems);
  const v = parsed.data;
  return {
    credential: v.credential,
    method: v.method,
    target: v.url,
    headers: v.headers?.list ?? [],
    rawHeaders: v.headers?.raw ?? {},
    body: decodeBody(v.body ?? null, v.body_base64 ?? null, limits.maxRequestBody),
    timeoutMs: v.timeout_ms ?? null,
    idempotencyKey: v.idempotency_key ?? null,
    reason: v.reason ?? null,
  };
}

// ---- A request that came as HTTP, not JSON (the proxy front door, SPEC §11)
//
// The same checks as the fields of POST /v1/http: method, the URL built
// from the request line, the header lines (a list: a name given twice is
// refused), the body's size. No timeout, idempotency key or reason: the
// defaults apply.

export interface RequestParts {
  method: string;
  url: string;
  // `url` as parseTarget read it, when the caller has parsed it already.
  parsed?: Target;
  headers: readonly [string, string][];
  body: Buffer | null;
}

export type UncredentialedRequest = Omit<HttpRequest, 'credential'>;

function checkHeaderList(list: readonly [string, string][]): Check<Headers> {
  try {
    return ok({ list: checkAgentHeaders(list), raw: Object.fromEntries(list) });
  } catch (e) {
    if (e instanceof Refusal) return bad(e.message);
    throw e;
  }
}

export function validateRequestParts(p: RequestParts, limits: RequestLimits): UncredentialedRequest {
  const method = checkMethod(p.method);
  const url = p.parsed ? ok(p.parsed) : checkUrl(p.url);
  const headers = checkHeaderList(p.headers);
  const problems: Problem[] = [];
  if (!method.ok) problems.push({ path: 'method', message: method.message });
  if (!url.ok) problems.push({ path: 'url', message: url.message });
  if (!headers.ok) problems.push({ path: 'headers', message: headers.message });
  if (!method.ok || !url.ok || !headers.ok) throw badRequest(problems);
  if (p.body && p.body.length > limits.maxRequestBody) throw tooLarge('body', p.body.length, limits.maxRequestBody);
  return {
    method: method.value,
    target: url.value,
    headers: headers.value.list,
    rawHeaders: headers.value.raw,
    body: p.body,
    timeoutMs: null,
    idempotencyKey: null,
    reason: null,
  };
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

// The raw body of POST /v1/http or /v1/ssh as one JSON object. The parser's
// own message quotes the input, so it is never passed on.
export function parseJsonBody(raw: Buffer): unknown {
  if (raw.length === 0) throw new Refusal('bad_request', 'the request body is empty; send one JSON object');
  let text: string;
  try {
    text = utf8.decode(raw);
  } catch {
    throw new Refusal('bad_request', 'the request body is not valid UTF-8; send JSON encoded as UTF-8');
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new Refusal(
      'bad_request',
      'the request body is not valid JSON; send one JSON object, e.g. {"credential": "...", "method": "GET", "url": "https://..."}',
    );
  }
  if (!isObject(value))
    throw new Refusal('bad_request', 'the request body must be a JSON object, not an array, string, number or null');
  return value;
}
