// Character classes shared by the credential validators. Definitions are
// written by people (or by an agent a person then reviews), so anything that
// displays differently from what it is — control characters, bidi overrides,
// zero-width and other format characters, line separators, broken
// surrogates — is refused rather than escaped.

// With the u flag, \p{Cs} only matches a surrogate that is not paired.
export const INVISIBLE = /[\p{Cc}\p{Cf}\p{Cs}\u2028\u2029]/u;

export function hasInvisible(text: string): boolean {
  return INVISIBLE.test(text);
}

// A value quoted for a message: definitions hold no secrets, but a value may
// be long or contain characters that would garble a terminal.
export function quote(value: string, max = 60): string {
  const cut = value.length > max ? `${value.slice(0, max)}…` : value;
  // JSON escapes C0 controls and broken surrogates; DEL, C1 and format
  // characters (bidi, zero-width) are escaped here.
  return JSON.stringify(cut).replace(/[\x7f-\x9f\p{Cf}\u2028\u2029]/gu, (c) => {
    const cp = c.codePointAt(0) as number;
    return cp > 0xffff ? `\\u{${cp.toString(16)}}` : `\\u${cp.toString(16).padStart(4, '0')}`;
  });
}

// The outcome of checking one field: its normalised value, or the problem.
export type Check<T> = { ok: true; value: T } | { ok: false; problem: string };

export function ok<T>(value: T): Check<T> {
  return { ok: true, value };
}

export function bad<T = never>(problem: string): Check<T> {
  return { ok: false, problem };
}
