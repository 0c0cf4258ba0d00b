// The field checks POST /v1/http and POST /v1/ssh share: each answers a
// value or a message naming what to do, and zod reports them per field.
import { z } from 'zod';
import { Refusal, Problem, formatProblems } from '../../shared/errors';
import { NAME_PATTERN } from '../../shared/credential/fields';
import { quote } from '../../shared/credential/text';

export interface RequestLimits {
  maxRequestBody: number; // bytes, decoded
  maxTimeout: number; // ms
}

export const MAX_REASON_LENGTH = 200;

// Standard base64 with padding: whole groups of four, "=" only at the end.
// The length is checked apart: a repeated group of four in the expression
// kept a backtrack entry per group and overflowed V8's regexp stack at
// ~4.5 M characters (an internal error instead of a refusal).
const BASE64_TEXT = /^[A-Za-z0-9+/]*={0,2}$/;

export function isBase64(v: string): boolean {
  return v.length % 4 === 0 && BASE64_TEXT.test(v);
}

export type Check<T> = { ok: true; value: T } | { ok: false; message: string };

export const ok = <T>(value: T): Check<T> => ({ ok: true, value });

export const bad = (message: string): Check<never> => ({ ok: false, message });

export function field<T>(check: (v: unknown) => Check<T>): z.ZodType<T> {
  return z.unknown().transform((v, ctx) => {
    const r = check(v);
    if (r.ok) return r.value;
    ctx.addIssue({ code: 'custom', message: r.message });
    return z.NEVER;
  });
}

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function checkCredential(v: unknown): Check<string> {
  if (v === undefined) return bad('is required; name the credential to use (GET /v1/credentials lists them)');
  if (typeof v !== 'string') return bad('must be a string naming a credential, e.g. "github"');
  if (!NAME_PATTERN.test(v)) {
    return bad(
      `${quote(v)} is not a credential name (1 to 64 of a-z, 0-9, ".", "_", "-"); GET /v1/credentials lists them`,
    );
  }
  return ok(v);
}

export function checkBody(v: unknown): Check<string> {
  if (typeof v !== 'string')
    return bad('must be a string of UTF-8 text; send bytes or JSON as a string, or use body_base64');
  if (!v.isWellFormed())
    return bad('is not well-formed Unicode (an unpaired surrogate); send bytes in body_base64 instead');
  return ok(v);
}

export function checkBodyBase64(v: unknown): Check<string> {
  if (typeof v !== 'string') return bad('must be a string of standard base64');
  if (!isBase64(v)) {
    const hint = /[-_]/.test(v)
      ? ' (it looks like base64url: use "+" and "/")'
      : /\s/.test(v)
        ? ' (remove whitespace and line breaks)'
        : '';
    return bad(`is not valid base64${hint}; send standard base64 with "=" padding and no line breaks`);
  }
  // Non-zero bits after the last character would be dropped silently: two
  // texts for the same bytes. Only the canonical text is accepted.
  if (v.length > 0 && v.slice(-4) !== Buffer.from(v.slice(-4), 'base64').toString('base64')) {
    return bad('is not canonical base64 (the unused bits of the last character are not zero); re-encode the body');
  }
  return ok(v);
}

export function checkTimeout(max: number): (v: unknown) => Check<number> {
  return (v) => {
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1 || v > max) {
      return bad(
        `must be a whole number of milliseconds from 1 to ${max} (max_timeout); lower it, or omit it for the default`,
      );
    }
    return ok(v);
  };
}

export function checkReason(v: unknown): Check<string> {
  if (typeof v !== 'string') return bad('must be a string: a short reason for the human, shown on the approval card');
  if (!v.isWellFormed()) return bad('is not well-formed Unicode (an unpaired surrogate)');
  // Counted in code points only when it may be too long (each is one or two
  // UTF-16 units): spreading megabytes into an array took ~300 ms.
  if (v.length > MAX_REASON_LENGTH && (v.length > 2 * MAX_REASON_LENGTH || [...v].length > MAX_REASON_LENGTH))
    return bad(`must be at most ${MAX_REASON_LENGTH} characters; shorten it`);
  return ok(v);
}

// Building a zod schema costs more than using it: one per max_timeout.
export function cachedBy<S>(build: (limits: RequestLimits) => S): (limits: RequestLimits) => S {
  const cache = new Map<number, S>();
  return (limits) => {
    let s = cache.get(limits.maxTimeout);
    if (s === undefined) {
      if (cache.size > 8) cache.clear();
      s = build(limits);
      cache.set(limits.maxTimeout, s);
    }
    return s;
  };
}

export function issueProblems(issue: z.core.$ZodIssue, known: readonly string[]): Problem[] {
  if (issue.code === 'unrecognized_keys') {
    const fields = known.join(', ');
    return issue.keys.map((k) => ({
      path: quote(k, 40),
      message: `unknown field; remove it (the fields are ${fields})`,
    }));
  }
  if (issue.path.length === 0) {
    return [{ path: '', message: 'the request must be a JSON object with fields credential, method, url, ...' }];
  }
  return [{ path: String(issue.path[0]), message: issue.message }];
}

export function badRequest(problems: readonly Problem[]): Refusal {
  return new Refusal('bad_request', `${formatProblems(problems)}`, { problems: problems.map((p) => ({ ...p })) });
}

export function base64Size(text: string): number {
  const pad = text.endsWith('==') ? 2 : text.endsWith('=') ? 1 : 0;
  return (text.length / 4) * 3 - pad;
}

export function decodeBody(
  text: string | null,
  base64: string | null,
  max: number,
  names: [string, string] = ['body', 'body_base64'],
): Buffer | null {
  if (text !== null) {
    const size = Buffer.byteLength(text, 'utf8');
    if (size > max) throw tooLarge(names[0], size, max);
    return Buffer.from(text, 'utf8');
  }
  if (base64 !== null) {
    const size = base64Size(base64);
    if (size > max) throw tooLarge(names[1], size, max);
    return Buffer.from(base64, 'base64');
  }
  return null;
}

export function tooLarge(fieldName: string, size: number, max: number): Refusal {
  return new Refusal(
    'body_too_large',
    `${fieldName}: the body is ${size} bytes, more than max_request_body (${max} bytes); send a smaller body`,
    { problems: [{ path: fieldName, message: `larger than ${max} bytes` }] },
  );
}
