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
import { startStack } from '../helpers/stack';
import { cardRequests } from '../helpers/card-requests';
import type { Answer } from '../helpers/dns-server';
import { Gen, judge, prng, fuzzSeed } from '../helpers/address-oracle';
import { canon, makeCases, readings } from '../helpers/address-spellings';

const SEED = fuzzSeed();
const CASES = 500;
const DNS_ANSWER = '8.8.4.4';

const V4_TARGETS = ['127.0.0.1', '10.0.0.1', '169.254.169.254', '0.0.0.0', '192.168.0.1', '100.100.100.200', '8.8.8.8'];
const V6_TARGETS = ['::1', '::ffff:7f00:1', 'fe80::1', 'fd00:ec2::254', '64:ff9b::a00:1', '2606:4700::1111'];

t.test(`random address spellings in request URLs (seed ${SEED})`, async (t) => {
  const g = new Gen(prng(SEED));
  const cases = makeCases(g, CASES, V4_TARGETS, V6_TARGETS);
  const read = readings(cases.map((c) => c.host));
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
    const readings = read[i]!;
    const url = `https://${c.host}:${s.up.port}/x`;
    const { status, text, err, card, outcome } = await ask({ credential: 'lit', method: 'GET', url });
    tally[outcome] = (tally[outcome] ?? 0) + 1;
    const row = {
      seed: SEED,
      host: c.host,
      target: c.target,
      readings: [...readings.values()],
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
