// Path segments that some origin reads as another path than the text a
// `paths` rule matched (SPEC §4). Shared by the agent's URL
// (daemon/pipeline/target.ts) and the rules themselves
// (shared/credential/fields.ts checkPathRule): a rule naming such a path
// could never match, because the request would be refused.
//
// The plain forms (a literal "." or ".." segment, "//", "\", a single
// percent-encoded "/", "." or "\") are checked by the callers before this,
// with their own messages. This module looks at each segment as origins may
// read it:
// - as servlet stacks do (Tomcat, Jetty, Spring): everything from the
//   first ";" is a path parameter and is dropped, so "..;x" is "..", ".;" is
//   ".", and a segment that starts with ";" is empty ("/a/;x/b" is
//   "/a//b"; as the last segment, "/a/;jsessionid=1" is "/a/", allowed);
// - percent-decoded, again and again until nothing changes (origins and
//   proxies that decode twice read "%252E" as "."): every decoding must give
//   valid UTF-8 (no overlong "%C0%AE", stray continuation byte, truncated
//   sequence, surrogate or code point above U+10FFFF), and no decoding
//   after the first may still hold an encoded "/", ".", "\" or NUL, nor an
//   IIS-style "%u" escape;
// - NFKC-normalised (after each decoding): the result may not contain "/"
//   or "\" (fullwidth "／", "＼", "℅" is "c/o"), nor an encoded separator
//   ("％２ｅ" is "%2e").
// In each of these readings a segment may not be "." or ".." (also before a
// ";" parameter), ignoring whitespace at its ends and control or invisible
// characters anywhere ("..%20", "．．", "‥", "..%3B").
//
// Decisions:
// - Three or more dots ("...", "…" which NFKC makes "...") are names, not
//   dot segments: servlet stacks, RFC 3986 and Windows path rules resolve
//   only "." and "..". Windows drops trailing dots of a last segment, so an
//   IIS origin may read "/public/..." as "/public/", which is still inside
//   the prefix the rule matched.
// - A ";" parameter on any other segment is kept ("/a;v=1/b").
// - A percent-encoded "%" that decodes to something harmless ("%2520" is a
//   literal "%20") is allowed; only what a second decoding would turn into a
//   separator, a dot segment, invalid UTF-8 or an NFKC separator is refused.
// - Decoding stops after MAX_LAYERS rounds; a segment that still changes is
//   refused (no legitimate path is encoded that many times, and the bound
//   keeps the cost linear in the length of the path).

// Encoded "/", "." and "\" change which resource a server serves without
// changing the text a rule matches; %00 truncates paths in some servers.
export const ENCODED_SEPARATOR = /%(?:2f|2e|5c|00)/i;
const IIS_ESCAPE = /%u[0-9a-f]{4}/i;
const ESCAPE = /%([0-9A-Fa-f]{2})/g;
const HAS_ESCAPE = /%[0-9A-Fa-f]{2}/;
const INVISIBLE = /[\p{Cc}\p{Cf}]/gu;
const MAX_LAYERS = 8;

const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

export interface PathFormProblem {
  segment: string; // the segment as written, for the message
  problem: string; // "is …", completing "path segment "x" …"
  fix: string; // what to write instead
}

const FIX_RESOLVED = 'write the resolved path instead (e.g. /a/b, not /a/..;/b)';
const FIX_ASCII = 'write the path in plain ASCII, percent-encoding only other text as UTF-8';

// The segment with its ";" parameters dropped, as servlet stacks read it.
function servletName(segment: string): string {
  const semi = segment.indexOf(';');
  return semi === -1 ? segment : segment.slice(0, semi);
}

function isDotName(name: string): boolean {
  const bare = name.replace(INVISIBLE, '').trim();
  return bare === '.' || bare === '..';
}

// One percent-decoding: null when the bytes are not valid UTF-8.
function decodeOnce(text: string): string | null {
  const parts: Buffer[] = [];
  let last = 0;
  for (const m of text.matchAll(ESCAPE)) {
    parts.push(Buffer.from(text.slice(last, m.index), 'utf8'), Buffer.from([parseInt(m[1] as string, 16)]));
    last = m.index + m[0].length;
  }
  parts.push(Buffer.from(text.slice(last), 'utf8'));
  try {
    return strictUtf8.decode(Buffer.concat(parts));
  } catch {
    return null;
  }
}

type Reading = 'decoded' | 'nfkc';

function readingProblem(text: string, reading: Reading, middle: boolean): Omit<PathFormProblem, 'segment'> | null {
  if (/[/\\]/.test(text)) {
    return reading === 'nfkc'
      ? {
          problem:
            'has a character that Unicode NFKC normalisation, which some servers apply, turns into "/" or "\\" (e.g. fullwidth "／" %EF%BC%8F, "℅" c/o)',
          fix: FIX_ASCII,
        }
      : { problem: 'decodes to "/" or "\\"', fix: 'write the path plainly, encoded once' };
  }
  if (isDotName(servletName(text))) {
    return reading === 'nfkc'
      ? {
          problem:
            'becomes a "." or ".." segment under Unicode NFKC normalisation, which some servers apply (e.g. fullwidth "．" %EF%BC%8E, "‥" %E2%80%A5)',
          fix: FIX_ASCII,
        }
      : {
          problem: 'is read as a "." or ".." segment once percent-decoded (e.g. "..%3B" as "..;", "..%20" as ".. ")',
          fix: FIX_RESOLVED,
        };
  }
  if (middle && text.startsWith(';')) {
    return {
      problem: `is read as an empty segment with a ";" parameter once ${reading === 'nfkc' ? 'NFKC-normalised' : 'percent-decoded'}, which servlet servers read as "//"`,
      fix: 'remove the segment',
    };
  }
  if (ENCODED_SEPARATOR.test(text)) {
    return reading === 'nfkc'
      ? {
          problem:
            'becomes an encoded "/", ".", "\\" or NUL under Unicode NFKC normalisation, which some servers apply (e.g. fullwidth "％２ｅ")',
          fix: FIX_ASCII,
        }
      : {
          problem:
            'is percent-encoded twice into an encoded "/", ".", "\\" or NUL (e.g. %252E, which a server decoding twice reads as ".")',
          fix: 'write the path plainly, encoded once',
        };
  }
  if (IIS_ESCAPE.test(text)) {
    return {
      problem: `holds a "%u" escape once ${reading === 'nfkc' ? 'NFKC-normalised' : 'percent-decoded'} (e.g. %25u002e), which IIS decodes`,
      fix: 'write the path plainly, encoded once as UTF-8',
    };
  }
  return null;
}

function segmentProblem(segment: string, middle: boolean): Omit<PathFormProblem, 'segment'> | null {
  if (isDotName(servletName(segment))) {
    return segment.includes(';')
      ? {
          problem:
            'is a "." or ".." segment with a ";" parameter, which servlet servers (Tomcat, Jetty, Spring) resolve as "." or ".."',
          fix: FIX_RESOLVED,
        }
      : { problem: 'is a "." or ".." segment', fix: FIX_RESOLVED };
  }
  if (middle && segment.startsWith(';')) {
    return {
      problem: 'is empty before its ";" parameter, which servlet servers read as "//"',
      fix: 'remove the segment, or put the parameter on a named segment',
    };
  }
  let reading = segment;
  for (let layer = 1; layer <= MAX_LAYERS; layer++) {
    const decoded = HAS_ESCAPE.test(reading) ? decodeOnce(reading) : reading;
    if (decoded === null) {
      return {
        problem:
          'has percent-encoded bytes that are not valid UTF-8 (overlong like %C0%AE, a stray or missing continuation byte, a surrogate, or above U+10FFFF)',
        fix: 'encode text as UTF-8 (e.g. "é" as %C3%A9)',
      };
    }
    if (decoded !== reading) {
      const p = readingProblem(decoded, 'decoded', middle);
      if (p) return p;
    }
    const normal = decoded.normalize('NFKC');
    if (normal !== decoded) {
      const p = readingProblem(normal, 'nfkc', middle);
      if (p) return p;
    }
    if (normal === reading) return null;
    reading = normal;
  }
  return {
    problem: `is still percent-encoded after ${MAX_LAYERS} rounds of decoding`,
    fix: 'write the path encoded once',
  };
}

// The first segment of `path` (which starts with "/") that some origin
// reads differently, or null.
export function pathFormProblem(path: string): PathFormProblem | null {
  const segments = path.split('/');
  for (let i = 1; i < segments.length; i++) {
    const segment = segments[i] as string;
    const p = segmentProblem(segment, i < segments.length - 1);
    if (p) return { segment, ...p };
  }
  return null;
}
