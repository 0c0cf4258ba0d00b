// Random spellings of IP addresses as URL and CONNECT hosts, and what
// other parsers read them as (test/addresses/host-spellings.test.ts,
// connect-spellings.test.ts): inet_aton forms (1 to 4 parts, octal, hex,
// leading zeros, `0X`), trailing dots, full-width and circled digits,
// ideographic and full-width dots, percent-encoding, IPv6 with leading
// zeros, upper case, dotted tails, zone ids, and broken brackets. The
// readings: WHATWG URL (node's `new URL`), glibc's inet_aton and
// getaddrinfo(AI_NUMERICHOST) (address-parsers.py).
import { execFileSync } from 'node:child_process';
import { Gen, parseV4, parseV6, v6Groups } from './address-oracle';
import { testSource } from './repo-root';

const FULLWIDTH_DIGIT = (d: string): string => String.fromCodePoint(0xff10 + Number(d));
const CIRCLED_DIGIT = (d: string): string => (d === '0' ? '⓪' : String.fromCodePoint(0x245f + Number(d)));
const MATH_DIGIT = (d: string): string => String.fromCodePoint(0x1d7ce + Number(d));
const DOTS = ['.', '.', '.', '。', '．', '｡'];

function part(g: Gen, n: number): string {
  switch (g.int(4)) {
    case 0:
      return `0${'0'.repeat(g.int(3))}${n.toString(8)}`;
    case 1: {
      const hex = n.toString(16);
      return `${g.pick(['0x', '0X'])}${'0'.repeat(g.int(3))}${g.int(2) ? hex.toUpperCase() : hex}`;
    }
    default:
      return String(n);
  }
}

// An inet_aton spelling of v (parts: bytes, the last one holding the rest).
export function atonSpelling(g: Gen, v: number): string {
  const k = 1 + g.int(4);
  const parts: string[] = [];
  for (let i = 0; i < k - 1; i++) parts.push(part(g, (v >>> (24 - 8 * i)) & 255));
  const restBits = 32 - 8 * (k - 1);
  const rest = restBits === 32 ? v : v & (2 ** restBits - 1);
  parts.push(part(g, rest >>> 0));
  return parts.join('.');
}

// Unicode look-alikes for digits and dots, a trailing dot, upper case.
export function decorate(g: Gen, host: string): string {
  const digitMap = g.pick([null, null, FULLWIDTH_DIGIT, CIRCLED_DIGIT, MATH_DIGIT]);
  let out = '';
  for (const ch of host) {
    if (/[0-9]/.test(ch) && digitMap && g.int(2)) out += digitMap(ch);
    else if (ch === '.') out += g.pick(DOTS);
    else if (ch === 'x' && g.int(4) === 0) out += 'ｘ';
    else out += ch;
  }
  if (g.int(4) === 0) out += g.pick(['.', '。', '..']);
  if (g.int(8) === 0) out = out.replace(/[0-9]/, (d) => `%3${d}`);
  return out;
}

export function v6Spelling(g: Gen, text: string): string {
  const groups = v6Groups(parseV6(text)).map((n) => {
    const h = n.toString(16);
    const padded = g.int(3) === 0 ? h.padStart(4, '0') : h;
    return g.int(3) === 0 ? padded.toUpperCase() : padded;
  });
  let body: string;
  if (g.int(3) === 0) {
    const w6 = parseInt(groups[6]!, 16);
    const w7 = parseInt(groups[7]!, 16);
    body = [...groups.slice(0, 6), `${w6 >> 8}.${w6 & 255}.${w7 >> 8}.${w7 & 255}`].join(':');
  } else body = groups.join(':');
  if (g.int(2)) body = body.replace(/(^|:)(0+:){2,}/, '$1:').replace(/^:([^:])/, '::$1');
  const zone = g.int(5) === 0 ? g.pick(['%25eth0', '%251', '%lo', '%25%30']) : '';
  const shape = g.int(10);
  if (shape === 0) return body + zone; // no brackets
  if (shape === 1) return `[${body}${zone}`;
  if (shape === 2) return `[${body.replace(/[0-9]/, (d) => FULLWIDTH_DIGIT(d))}]`;
  return `[${body}${zone}]`;
}

export interface Case {
  host: string;
  target: string;
}

// `count` spellings of the given targets, one in four IPv6.
export function makeCases(g: Gen, count: number, v4: string[], v6: string[]): Case[] {
  const cases: Case[] = [];
  for (let i = 0; i < count; i++) {
    if (g.int(4) === 0) {
      const target = g.pick(v6);
      cases.push({ host: v6Spelling(g, target), target });
    } else if (g.int(6) === 0) {
      const target = g.pick(v4);
      cases.push({ host: `[::ffff:${decorate(g, atonSpelling(g, parseV4(target)))}]`, target });
    } else {
      const target = g.pick(v4);
      cases.push({ host: decorate(g, atonSpelling(g, parseV4(target))), target });
    }
  }
  return cases;
}

export const canon = (a: string): string => (a.includes(':') ? parseV6(a.replace(/^\[|\]$/g, '')).toString(16) : a);

// The address WHATWG URL reads (its host serialised as a dotted quad or in
// brackets), or null: a name.
function whatwg(host: string): string | null {
  try {
    const h = new URL(`https://${host}/`).hostname;
    return /^(\d{1,3}\.){3}\d{1,3}$/.test(h) || h.startsWith('[') ? h.replace(/^\[|\]$/g, '') : null;
  } catch {
    return null;
  }
}

// Every address some parser reads each host as: its text by its canonical
// form (canon()).
export function readings(hosts: string[]): Map<string, string>[] {
  const py = execFileSync('python3', [testSource('helpers', 'address-parsers.py')], {
    input: hosts.map((h) => JSON.stringify(h)).join('\n') + '\n',
  })
    .toString()
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as string[]);
  return hosts.map((h, i) => {
    const out = new Map<string, string>(py[i]!.map((a) => [canon(a), a]));
    const w = whatwg(h);
    if (w) out.set(canon(w), w);
    return out;
  });
}
