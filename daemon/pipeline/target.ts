// The `url` of an agent's HTTP request, parsed into what postern will send
// (SPEC §4 path rules, §6.2 URL rules).
//
// WHATWG `new URL()` repairs input silently: it resolves `.`/`..` segments
// (also `%2e`), turns `\` into `/`, skips extra slashes after `http:`, strips
// leading/trailing spaces and control characters, percent-decodes hosts and
// encodes some characters. A policy must judge what is sent, so the raw text
// is split here by hand and every repair URL would make is refused instead.
// URL is used only for what it does well and the rules share: host
// normalisation (case, IDNA, numeric IPv4 spellings, IPv6 compression). A
// last cross-check makes sure URL reads the same host, port and path.
//
// Decisions where the SPEC is silent:
// - Scheme is case-insensitive (`HTTPS:` is `https`).
// - Fragments (`#`, even empty) are refused: they are never sent, so they
//   can only mislead a reader.
// - Unicode dots (U+3002, U+FF0E, U+FF61), fullwidth letters and other IDNA
//   mappings are accepted after mapping, as rule hosts are: policy and the
//   approval card see only the normalised host, so `a.example.com。evil.test`
//   is `a.example.com.evil.test` everywhere it is judged or shown.
// - Invisible characters (soft hyphen, zero-width, bidi) and whitespace are
//   refused anywhere, though IDNA would drop some of them from a host.
// - A percent-encoded host (`%65xample.com`) is refused.
// - Numeric IPv4 spellings (`2130706433`, `0177.0.0.1`, `0x7f.1`, `127.1`)
//   become the dotted quad, an IP literal: it only matches a rule naming it.
// - Path: only RFC 3986 path characters (unreserved, sub-delims, `:@/`, and
//   `%` + two hex digits); anything else (space, quote, `<>{}|^[]`, non-ASCII)
//   is refused, not encoded, so the path judged is the path sent. Also `%00`.
//   An empty path is `/`.
// - Path segments some origin reads as another path (SPEC §4) are refused,
//   never repaired; the rule is in shared/path-form.ts, which also checks
//   `paths` rules. In order: an encoded "/", ".", "\" or NUL; "//"; a "."
//   or ".." segment; then each segment as servlet stacks read it (";"
//   parameters dropped: "..;x", ".;", and "/;x/" which is "//"), as a server
//   decoding it again and again reads it (until nothing changes: "%252E",
//   "%25%32%45", invalid UTF-8 such as overlong "%C0%AE", "..%3B", "..%20"),
//   and NFKC-normalised after each decoding ("．", "‥", "／", "＼", "℅");
//   an IIS "%u" escape left after a decoding (%25u002e) is refused too, and
//   so is a segment still changing after 8 rounds of decoding.
//   Scanning every code point, NFKC gives "." for U+2024, U+FE52, U+FF0E,
//   ".." for U+2025, U+FE30, "/" or "\" for U+FF0F, U+FF3C, U+FE68 and the
//   "a/c"-style signs U+2100, U+2101, U+2105, U+2106; the test computes the
//   set itself rather than trusting this list.
//   Allowed look-alikes: "a.b", "...", "…" (names, not dot segments; an
//   IIS origin may drop trailing dots of a last segment, which stays inside
//   the prefix), ";" parameters on named segments ("/a;v=1"), "%2520"
//   (decodes twice to a harmless " "), and any valid UTF-8 ("%C3%A9").
// - Query: printable ASCII (no space, `#`, `\`), `%` + two hex digits; sent
//   as written. A lone `?` is kept.
// - Port: 1 to 5 digits, 1–65535; `:` with no port is refused; an explicit
//   default port (`:443`) is the same target as none.
import { Refusal } from '../../shared/errors';
import { parseHostPattern, normaliseUrlHost } from '../../shared/host-pattern';
import { INVISIBLE, quote } from '../../shared/credential/text';
import { ENCODED_SEPARATOR, pathFormProblem } from '../../shared/path-form';

export type Scheme = 'http' | 'https';

export interface Target {
  scheme: Scheme;
  host: string; // normalised as rule hosts are (lower case, punycode, no trailing dot, [IPv6])
  hostKind: 'name' | 'ipv4' | 'ipv6';
  port: number; // explicit or the scheme's default
  path: string; // exactly as sent, byte for byte
  query: string; // '' or '?…' exactly as sent
}

export const MAX_URL_BYTES = 16 * 1024;
export const DEFAULT_PORTS: Readonly<Record<Scheme, number>> = { http: 80, https: 443 };

const EXAMPLE = 'e.g. "https://api.example.com/v1/items?page=2"';
// RFC 3986 pchar plus "/": what a path can hold without encoding.
const PATH_CHAR = /[A-Za-z0-9\-._~!$&'()*+,;=:@/%]/;
const PATH_TEXT = /^[A-Za-z0-9\-._~!$&'()*+,;=:@/%]*$/;
const QUERY_CHAR = /[\x21-\x7e]/;
const QUERY_TEXT = /^[\x21-\x7e]*$/;
const BAD_PERCENT = /%(?![0-9A-Fa-f]{2})/;
const HOST_NAME_CHARS = /^[a-z0-9._-]+$/;

function refuse(problem: string): never {
  throw new Refusal('bad_request', `url ${problem}`);
}

// One offending character, printable in a message.
function shown(ch: string): string {
  return quote(ch);
}

function checkWholeText(url: string): void {
  if (url === '') refuse(`is empty; send an absolute http or https URL, ${EXAMPLE}`);
  if (Buffer.byteLength(url, 'utf8') > MAX_URL_BYTES) {
    refuse(`is longer than ${MAX_URL_BYTES} bytes; shorten it (send large data in the body)`);
  }
  if (INVISIBLE.test(url)) {
    refuse(
      'contains a control or invisible character (CR, LF, NUL, TAB, zero-width, bidi...); remove it, or percent-encode it in the path or query',
    );
  }
  if (/\s/u.test(url)) refuse('contains whitespace; percent-encode spaces in the path or query as %20');
  if (url.includes('\\')) refuse('contains "\\"; use "/" in paths, or percent-encode it in the query as %5C');
  if (url.includes('#')) refuse('contains a fragment ("#..."); remove it: fragments are never sent to the server');
}

interface Parts {
  scheme: Scheme;
  hostText: string;
  portText: string | null;
  rawPath: string;
  rawQuery: string | null;
}

function splitUrl(url: string): Parts {
  const m = /^([A-Za-z][A-Za-z0-9+.-]*):/.exec(url);
  if (!m) refuse(`is not an absolute URL; write scheme, host and path, ${EXAMPLE}`);
  const schemeText = (m[1] as string).toLowerCase();
  if (schemeText !== 'http' && schemeText !== 'https') {
    refuse(`scheme ${quote(schemeText)} is not supported; use http or https`);
  }
  const afterScheme = url.slice(m[0].length);
  if (!afterScheme.startsWith('//')) {
    refuse(`must be written as ${schemeText}://host/path; write the two slashes after "${schemeText}:", ${EXAMPLE}`);
  }
  const rest = afterScheme.slice(2);
  const end = rest.search(/[/?]/);
  const authority = end === -1 ? rest : rest.slice(0, end);
  const pathAndQuery = end === -1 ? '' : rest.slice(end);
  if (authority.includes('@')) {
    refuse(
      'must not contain userinfo ("user@" or "user:password@" before the host); remove it: the credential supplies authentication',
    );
  }
  let hostText: string;
  let portText: string | null = null;
  if (authority.startsWith('[')) {
    const close = authority.indexOf(']');
    if (close === -1) refuse('has an unclosed "[" in the host; write an IPv6 address as [2001:db8::1]');
    hostText = authority.slice(0, close + 1);
    const after = authority.slice(close + 1);
    if (after !== '') {
      if (!after.startsWith(':')) refuse('has characters after the "]" of the IPv6 host; only ":port" may follow it');
      portText = after.slice(1);
    }
  } else {
    const colons = authority.split(':').length - 1;
    if (colons > 1) refuse('host looks like an IPv6 address without brackets; write it as [2001:db8::1]');
    const colon = authority.indexOf(':');
    hostText = colon === -1 ? authority : authority.slice(0, colon);
    if (colon !== -1) portText = authority.slice(colon + 1);
  }
  if (hostText === '' || hostText === '[]') refuse(`has an empty host; name the host, ${EXAMPLE}`);
  const q = pathAndQuery.indexOf('?');
  const rawPath = q === -1 ? pathAndQuery : pathAndQuery.slice(0, q);
  const rawQuery = q === -1 ? null : pathAndQuery.slice(q);
  return { scheme: schemeText, hostText, portText, rawPath, rawQuery };
}

function parsePort(portText: string | null, scheme: Scheme): number {
  if (portText === null) return DEFAULT_PORTS[scheme];
  if (portText === '') refuse('has ":" after the host but no port; remove the ":" or write a port from 1 to 65535');
  if (!/^[0-9]{1,5}$/.test(portText)) refuse(`port ${quote(portText)} is not a number from 1 to 65535; fix the port`);
  const port = Number(portText);
  if (port < 1 || port > 65535) refuse(`port ${port} is out of range; use a port from 1 to 65535`);
  return port;
}

interface ParsedHost {
  host: string;
  hostKind: Target['hostKind'];
}

// A host's parse depends on its text alone, and most requests name a host
// seen before: the verdicts on hosts accepted are kept, a bounded number
// (the oldest goes first). A refused host is judged afresh every time.
const hostsParsed = new Map<string, ParsedHost>();
const HOSTS_KEPT = 256;

function parseHost(hostText: string, scheme: Scheme): ParsedHost {
  const key = `${scheme}://${hostText}`;
  const known = hostsParsed.get(key);
  if (known) return known;
  const parsed = parseHostAfresh(hostText, scheme);
  if (hostsParsed.size >= HOSTS_KEPT) hostsParsed.delete(hostsParsed.keys().next().value as string);
  hostsParsed.set(key, parsed);
  return parsed;
}

function parseHostAfresh(hostText: string, scheme: Scheme): ParsedHost {
  if (hostText.startsWith('[') && hostText.includes('%')) {
    refuse('has an IPv6 zone id ("%25..." in the host); remove it: zone ids are not allowed');
  }
  if (hostText.includes('%')) refuse('has a percent-encoded host; write the host name plainly, e.g. "api.example.com"');
  let hostname: string;
  try {
    hostname = new URL(`${scheme}://${hostText}/`).hostname;
  } catch {
    refuse(`host ${quote(hostText)} is not a valid host name or IP address; fix the host`);
  }
  const host = normaliseUrlHost(hostname);
  if (host.endsWith('.') || host.startsWith('.') || host.includes('..')) {
    refuse(`host ${quote(hostText)} has an empty label ("..", or a leading or second trailing dot); fix the host`);
  }
  if (!host.startsWith('[') && !HOST_NAME_CHARS.test(host)) {
    refuse(
      `host ${quote(hostText)} contains a character a host name cannot have; use letters, digits, "-", "_" and "."`,
    );
  }
  const parsed = parseHostPattern(host);
  if (!parsed.ok) refuse(`host ${quote(hostText)} ${parsed.problem}; fix the host`);
  if (parsed.value.wildcard || parsed.value.host !== host) {
    refuse(`host ${quote(hostText)} is not a valid host name; fix the host`);
  }
  const hostKind = parsed.value.ip === 4 ? 'ipv4' : parsed.value.ip === 6 ? 'ipv6' : 'name';
  return Object.freeze({ host, hostKind });
}

function checkPath(rawPath: string): string {
  const path = rawPath === '' ? '/' : rawPath;
  // One pass over the whole text; character by character only to name
  // the one that is refused.
  if (!PATH_TEXT.test(path))
    for (const ch of path) {
      if (!PATH_CHAR.test(ch)) {
        refuse(
          `path contains ${shown(ch)}, which is not sent as written; percent-encode it (e.g. space as %20, "é" as %C3%A9)`,
        );
      }
    }
  if (BAD_PERCENT.test(path)) refuse('path has a "%" not followed by two hex digits; write a literal "%" as %25');
  if (ENCODED_SEPARATOR.test(path)) {
    refuse(
      'path contains an encoded "/", ".", "\\" or NUL (%2F, %2E, %5C, %00, any case); write the path plainly, without them',
    );
  }
  if (path.includes('//')) refuse('path contains "//" (an empty segment); remove the extra "/"');
  if (path.split('/').some((s) => s === '.' || s === '..')) {
    refuse('path contains a "." or ".." segment; write the resolved path instead (e.g. /a/b, not /a/./b or /a/x/../b)');
  }
  const form = pathFormProblem(path);
  if (form) refuse(`path segment ${quote(form.segment)} ${form.problem}; ${form.fix}`);
  return path;
}

function checkQuery(rawQuery: string | null): string {
  if (rawQuery === null) return '';
  if (!QUERY_TEXT.test(rawQuery))
    for (const ch of rawQuery) {
      if (!QUERY_CHAR.test(ch)) {
        refuse(`query contains ${shown(ch)}, which is not sent as written; percent-encode it (e.g. "é" as %C3%A9)`);
      }
    }
  if (BAD_PERCENT.test(rawQuery)) refuse('query has a "%" not followed by two hex digits; write a literal "%" as %25');
  return rawQuery;
}

// The parse above and WHATWG URL must agree on what the URL names; if
// they ever do not, the URL is ambiguous and refused.
function crossCheck(url: string, t: Target): void {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    refuse('could not be parsed; check it is a plain absolute http or https URL');
  }
  const port = u.port === '' ? DEFAULT_PORTS[t.scheme] : Number(u.port);
  if (
    normaliseUrlHost(u.hostname) !== t.host ||
    port !== t.port ||
    u.pathname !== t.path ||
    `${u.protocol}` !== `${t.scheme}:`
  ) {
    refuse('is ambiguous (URL parsers read it differently); write it plainly, percent-encoding unusual characters');
  }
}

export function parseTarget(url: string): Target {
  if (typeof url !== 'string') refuse(`must be a string, ${EXAMPLE}`);
  checkWholeText(url);
  const parts = splitUrl(url);
  const port = parsePort(parts.portText, parts.scheme);
  const { host, hostKind } = parseHost(parts.hostText, parts.scheme);
  const target: Target = {
    scheme: parts.scheme,
    host,
    hostKind,
    port,
    path: checkPath(parts.rawPath),
    query: checkQuery(parts.rawQuery),
  };
  crossCheck(url, target);
  return target;
}

// The origin as a request names it, for messages, pools and the card.
export function formatOrigin(t: Target): string {
  return `${t.scheme}://${t.host}:${t.port}`;
}
