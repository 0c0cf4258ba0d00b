// Host names in credential definitions: the `host` of an HTTP `[[allow]]`
// rule (exact, or `*.example.com`) and the `host` of an SSH credential.
//
// Normal form, so that a rule compares equal to a WHATWG URL's `hostname`:
// - lower case, one trailing dot removed, IDNA to punycode
//   (`bücher.example` → `xn--bcher-kva.example`), through node:url's
//   domainToASCII, the same mapping URL parsing applies to requests;
// - IPv4 only as four decimal numbers without leading zeros (`127.1`,
//   `0x7f.0.0.1` and `010.0.0.1` are refused, not reinterpreted);
// - IPv6 with or without brackets in the definition; an HTTP rule stores it
//   in brackets, compressed (`[2001:db8::1]`), exactly as URL.hostname
//   prints it; an SSH host stores it bare (`2001:db8::1`), as a connect()
//   address. Zone ids (`%eth0`) are refused.
// - A wildcard is only the whole first label, followed by at least two
//   labels: `*.example.com` covers `a.example.com` and `a.b.example.com`,
//   never `example.com` itself. `*`, `*.com`, `a.*.com`, `foo*.com` are refused.
//   Public suffixes are not known here: `*.co.uk` is the author's choice.
import { domainToASCII } from 'node:url';
import ipaddr from 'ipaddr.js';
import { Check, ok, bad, hasInvisible, quote } from './credential/text';

export const MAX_HOST_LENGTH = 253;

const DOTTED_QUAD =
  /^(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$/;
// WHATWG URL parses a host whose last label is a number as IPv4.
const NUMERIC_LABEL = /^(?:[0-9]+|0x[0-9a-f]*)$/i;
const LABEL = /^[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?$/;
const NOT_IN_HOST = /[/\\?#%@[\]]/;

export interface ParsedHost {
  host: string;
  wildcard: boolean;
  ip: 4 | 6 | null;
}

type Where = 'http' | 'ssh';

function portHint(where: Where): string {
  return where === 'http' ? 'list ports in ports = [...]' : 'set port = N';
}

function parseIpv6(inner: string, where: Where): Check<ParsedHost> {
  if (inner.includes('%')) return bad('must not contain an IPv6 zone id ("%...")');
  if (!ipaddr.IPv6.isValid(inner)) return bad(`${quote(inner)} is not a valid IPv6 address`);
  const bracketed = new URL(`http://[${inner}]/`).hostname;
  return ok({ host: where === 'http' ? bracketed : bracketed.slice(1, -1), wildcard: false, ip: 6 });
}

// A host whose last label is a number is an IPv4 address to URL parsing;
// only the plain dotted-quad spelling is accepted.
function parseIpv4(text: string, wildcard: boolean): Check<ParsedHost> {
  if (wildcard) return bad('a wildcard cannot be combined with an IP address');
  if (!DOTTED_QUAD.test(text)) {
    return bad(
      'looks like an IPv4 address but is not four decimal numbers without leading zeros (write e.g. "192.0.2.10"), or its last label is a number',
    );
  }
  return ok({ host: text, wildcard: false, ip: 4 });
}

function lastLabel(host: string): string {
  return host.slice(host.lastIndexOf('.') + 1);
}

function parseName(name: string, wildcard: boolean): Check<ParsedHost> {
  if (name.includes('*')) {
    return bad('a wildcard may only be the whole first label, followed by at least two labels, as in "*.example.com"');
  }
  const stripped = name.endsWith('.') ? name.slice(0, -1) : name;
  if (NUMERIC_LABEL.test(lastLabel(stripped))) return parseIpv4(stripped, wildcard);
  const ascii = domainToASCII(stripped.toLowerCase());
  if (ascii === '') return bad('is not a valid host name (it contains characters a host cannot have, or bad punycode)');
  // IDNA maps e.g. fullwidth digits to ASCII ones: check again after it.
  if (NUMERIC_LABEL.test(lastLabel(ascii))) return parseIpv4(stripped, wildcard);
  const labels = ascii.split('.');
  for (const label of labels) {
    if (label === '') return bad('has an empty label ("..", or a leading or second trailing dot)');
    if (label.length > 63) return bad(`has a label longer than 63 characters`);
    if (!LABEL.test(label)) {
      return bad(
        `label ${quote(label)} may contain only letters, digits, "-" and "_", and may not start or end with "-"`,
      );
    }
  }
  if (ascii.length > MAX_HOST_LENGTH) return bad(`is longer than ${MAX_HOST_LENGTH} characters`);
  if (wildcard && labels.length < 2) {
    return bad(
      '"*." must be followed by at least two labels, e.g. "*.example.com"; a wildcard over a whole top-level domain is refused',
    );
  }
  return ok({ host: wildcard ? `*.${ascii}` : ascii, wildcard, ip: null });
}

function parseHost(input: unknown, where: Where): Check<ParsedHost> {
  if (typeof input !== 'string') return bad('must be a string');
  if (input === '') return bad('is empty; write a host name such as "api.example.com"');
  if (hasInvisible(input) || /\s/u.test(input)) return bad('contains whitespace or a control or invisible character');
  if (input.includes('://') || input.includes('/')) {
    return bad(
      'must be a host name only, without scheme or path: e.g. "api.example.com", not "https://api.example.com/"',
    );
  }
  if (input.includes('@')) return bad('must not contain userinfo ("user@"); write the host only');
  if (input.startsWith('[')) {
    if (input.endsWith(']')) return parseIpv6(input.slice(1, -1), where);
    if (/\]:[0-9]*$/.test(input)) return bad(`must not contain a port; ${portHint(where)}`);
    return bad('has an unclosed "["; write an IPv6 address as "[2001:db8::1]" or "2001:db8::1"');
  }
  if (input.includes(':')) {
    if (/^[^:]*:[0-9]*$/.test(input)) return bad(`must not contain a port; ${portHint(where)}`);
    return parseIpv6(input, where);
  }
  if (NOT_IN_HOST.test(input)) return bad('contains a character a host name cannot have (one of / \\ ? # % @ [ ])');
  if (input.startsWith('*.')) {
    if (where === 'ssh') return bad('must be one host; wildcards are only for HTTP allow rules');
    return parseName(input.slice(2), true);
  }
  return parseName(input, false);
}

// The host of an HTTP `[[allow]]` rule: exact host, IP literal, or `*.`.
export function parseHostPattern(input: unknown): Check<ParsedHost> {
  return parseHost(input, 'http');
}

// The host of an SSH credential: one name or IP address, no wildcard.
export function parseSshHost(input: unknown): Check<ParsedHost> {
  return parseHost(input, 'ssh');
}

// A request's host as WHATWG URL gives it (lower case, punycode, IPv6 in
// brackets) minus one trailing dot, which names the same host.
export function normaliseUrlHost(hostname: string): string {
  return hostname.endsWith('.') ? hostname.slice(0, -1) : hostname;
}

// Whether a normalised rule host covers a request host (URL.hostname). An
// IP literal only matches the same literal; a wildcard needs at least one
// label in front of its base.
export function hostPatternMatches(pattern: string, hostname: string): boolean {
  const host = normaliseUrlHost(hostname);
  if (!pattern.startsWith('*.')) return host === pattern;
  const base = pattern.slice(1); // ".example.com"
  return host.length > base.length && host.endsWith(base) && !host.startsWith('.');
}
