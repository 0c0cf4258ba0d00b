// Random spellings of IP addresses in the URL of POST /v1/http (SPEC §6.2
// URLs): inet_aton forms (1 to 4 parts, octal, hex, leading zeros, `0X`),
// trailing dots, full-width and circled digits, ideographic and full-width
// dots, percent-encoding, IPv6 with leading zeros, upper case, dotted
// tails, zone ids, and broken brackets. Every credential rule names a
// literal (a blocked one, or a public one as a control) or `*.fuzz.test`;
// allow_addresses is empty, and every name resolves to the public
// 8.8.4.4. The approver denies every card: a card is the proof the daemon
// would have connected, to the address it shows.
// Oracles for what the host means: WHATWG URL (node's `new URL`), glibc's
// inet_aton and getaddrinfo(AI_NUMERICHOST) (../helpers/address-parsers.py).
// Invariants: no card ever shows an address the IANA oracle calls blocked;
// a card for a host some parser reads as an address shows that address or
// the checked DNS answer; every request gets an answer; the daemon lives.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { startStack } from '../helpers/stack';
import { cardRequests } from '../helpers/card-requests';
import type { Answer } from '../helpers/dns-server';
import { Gen, judge, parseV4, parseV6, prng, v6Groups, fuzzSeed } from '../helpers/address-oracle';

const SEED = fuzzSeed();
const CASES = 500;
const DNS_ANSWER = '8.8.4.4';

const V4_TARGETS = ['127.0.0.1', '10.0.0.1', '169.254.169.254', '0.0.0.0', '192.168.0.1', '100.100.100.200', '8.8.8.8'];
const V6_TARGETS = ['::1', '::ffff:7f00:1', 'fe80::1', 'fd00:ec2::254', '64:ff9b::a00:1', '2606:4700::1111'];

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
function atonSpelling(g: Gen, v: number): string {
  const k = 1 + g.int(4);
  const parts: string[] = [];
  for (let i = 0; i < k - 1; i++) parts.push(part(g, (v >>> (24 - 8 * i)) & 255));
  const restBits = 32 - 8 * (k - 1);
  const rest = restBits === 32 ? v : v & (2 ** restBits - 1);
  parts.push(part(g, rest >>> 0));
  return parts.join('.');
}

// Unicode look-alikes for digits and dots, a trailing dot, upper case.
function decorate(g: Gen, host: string): string {
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

function v6Spelling(g: Gen, text: string): string {
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

interface Case {
  host: string;
  target: string;
}

function makeCases(g: Gen): Case[] {
  const cases: Case[] = [];
  for (let i = 0; i < CASES; i++) {
    if (g.int(4) === 0) {
      const target = g.pick(V6_TARGETS);
      cases.push({ host: v6Spelling(g, target), target });
    } else if (g.int(6) === 0) {
      const target = g.pick(V4_TARGETS);
      cases.push({ host: `[::ffff:${decorate(g, atonSpelling(g, parseV4(target)))}]`, target });
    } else {
      const target = g.pick(V4_TARGETS);
      cases.push({ host: decorate(g, atonSpelling(g, parseV4(target))), target });
    }
  }
  return cases;
}

const canon = (a: string): string => (a.includes(':') ? parseV6(a.replace(/^\[|\]$/g, '')).toString(16) : a);

function whatwg(host: string): string | null {
  try {
    const h = new URL(`https://${host}/`).hostname;
    return /^[0-9.]+$/.test(h) || h.startsWith('[') ? h.replace(/^\[|\]$/g, '') : null;
  } catch {
    return null;
  }
}

t.test(`random address spellings in request URLs (seed ${SEED})`, async (t) => {
  const g = new Gen(prng(SEED));
  const cases = makeCases(g);
  const py = execFileSync('python3', [join(__dirname, '../helpers/address-parsers.py')], {
    input: cases.map((c) => JSON.stringify(c.host)).join('\n') + '\n',
  })
    .toString()
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as string[]);
  // Every name resolves to DNS_ANSWER (A), no AAAA.
  const records = new Proxy({} as Record<string, Answer>, {
    getOwnPropertyDescriptor: () => ({ value: { A: [DNS_ANSWER] }, configurable: true, enumerable: true }),
    get: () => ({ A: [DNS_ANSWER] }),
    has: () => true,
  });
  const s = await startStack({ names: ['*.fuzz.test'], records });
  t.teardown(() => s.close());
  const hosts = [...V4_TARGETS, ...V6_TARGETS.map((a) => `[${a}]`), '*.fuzz.test'];
  const rules = hosts.map((h) => `[[allow]]\nhost = "${h}"\nports = [${s.up.port}]\n`).join('');
  s.addCredential(
    'lit',
    `name = "lit"\nkind = "http"\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n${rules}`,
    'fuzz-secret-value',
  );
  const ask = await cardRequests(s);

  const failures: unknown[] = [];
  const notes: unknown[] = [];
  const tally: Record<string, number> = {};
  for (const [i, c] of cases.entries()) {
    const readings = new Set<string>([...py[i]!.map(canon)]);
    const w = whatwg(c.host);
    if (w) readings.add(canon(w));
    const url = `https://${c.host}:${s.up.port}/x`;
    const { status, text, err, card, outcome } = await ask({ credential: 'lit', method: 'GET', url });
    tally[outcome] = (tally[outcome] ?? 0) + 1;
    const row = {
      seed: SEED,
      host: c.host,
      target: c.target,
      readings: [...readings],
      status: status,
      code: err?.code,
    };
    if (!card && !err) failures.push({ ...row, why: `no refusal body: ${text.slice(0, 200)}` });
    if (!card) continue;
    const shown = String(card.action['address']);
    const o = judge(shown, []);
    if (o.verdict === 'must_block') failures.push({ ...row, shown, why: `card for a blocked address: ${o.why}` });
    if (readings.size > 0 && !readings.has(canon(shown)) && shown !== DNS_ANSWER) {
      failures.push({ ...row, shown, why: 'the card shows an address no parser reads and DNS did not answer' });
    }
    if (readings.size > 0 && !readings.has(canon(shown))) notes.push({ ...row, shown });
  }
  t.same(
    failures.slice(0, 20),
    [],
    `${failures.length} of ${cases.length} spellings break an invariant (seed ${SEED})`,
  );
  t.comment(`outcomes: ${JSON.stringify(tally)}`);
  if (notes.length) t.comment(`read as a name where a parser reads an address: ${JSON.stringify(notes.slice(0, 5))}`);
  t.ok((tally['card'] ?? 0) > 5 && (tally['denied_address'] ?? 0) > 50, 'public and blocked literals both reached');
  t.equal(s.up.requests.length, 0, 'the upstream saw no request');
  const still = await s.request({ credential: 'lit', method: 'GET', url: `https://127.0.0.1:${s.up.port}/x` });
  t.equal((still.json as { error?: { code: string } }).error?.code, 'denied_address', 'the daemon still serves');
});
