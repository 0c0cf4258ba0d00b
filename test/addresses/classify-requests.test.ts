// The differential of classify-oracle.test.ts through the real daemon: a
// seeded sample of addresses (biased to range edges and IPv4-embedding
// forms) is answered by the test's UDP DNS server for a name of its own,
// and requested under four credentials (allow_addresses none, everything,
// IPv6 only, IPv4 only). The approver denies every card, so nothing is
// ever sent; a card is the proof the daemon would have connected, and the
// address on it is what it would have connected to. Each outcome must be:
// - a card showing the answered address, only when the oracle does not
//   call the address blocked for that credential (and the compiled
//   classifier agreed it was allowed); or
// - 403 denied_address naming it, only when the oracle does not call it
//   reachable.
// A few names answer several addresses (A and AAAA, some blocked): any
// blocked one refuses the request. The daemon must serve every request.
import t from 'tap';
import { join } from 'node:path';
import { startStack } from '../helpers/stack';
import { cardRequests } from '../helpers/card-requests';
import type { Answer } from '../helpers/dns-server';
import {
  Gen,
  embedV4,
  judge,
  parseV6,
  prng,
  randomV4,
  randomV6,
  v4ToString,
  v6ToString,
  fuzzSeed,
} from '../helpers/address-oracle';
import { ROOT } from '../helpers/repo-root';

type Classify = typeof import('../../daemon/pipeline/classify');
// eslint-disable-next-line @typescript-eslint/no-require-imports
const C = require(join(ROOT, 'dist/daemon/pipeline/classify.js')) as Classify;

const SEED = fuzzSeed();
const SINGLE = 100;
const MIXED = 20;
const CREDS: Record<string, string[]> = {
  none: [],
  every: ['0.0.0.0/0', '::/0'],
  six: ['::/0'],
  four: ['0.0.0.0/0'],
};

const same = (a: string, b: string): boolean =>
  a.includes(':') && b.includes(':') ? parseV6(a) === parseV6(b) : a === b;

interface Case {
  name: string;
  cred: string;
  addresses: string[];
}

t.test(`sampled addresses through DNS and the daemon (seed ${SEED})`, async (t) => {
  const g = new Gen(prng(SEED));
  const pick = (): string => {
    const r = g.int(3);
    if (r === 0) return v4ToString(randomV4(g));
    if (r === 1) return v6ToString(embedV4(g, randomV4(g)));
    return v6ToString(randomV6(g));
  };
  const cases: Case[] = [];
  const records: Record<string, Answer> = {};
  for (let i = 0; i < SINGLE + MIXED; i++) {
    const n = i < SINGLE ? 1 : 2 + g.int(3);
    const addresses = Array.from({ length: n }, pick);
    const name = `n${i}.fuzz.test`;
    const A = addresses.filter((a) => !a.includes(':'));
    const AAAA = addresses.filter((a) => a.includes(':'));
    records[name] = { A, AAAA };
    // The daemon orders A before AAAA, each in answer order.
    cases.push({ name, cred: g.pick(Object.keys(CREDS)), addresses: [...A, ...AAAA] });
  }
  const s = await startStack({ names: ['*.fuzz.test'], records });
  t.teardown(() => s.close());
  for (const [name, allow] of Object.entries(CREDS)) {
    s.addCredential(
      name,
      `name = "${name}"\nkind = "http"\nallow_addresses = ${JSON.stringify(allow)}\n` +
        `[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n` +
        `[[allow]]\nhost = "*.fuzz.test"\nports = [${s.up.port}]\n`,
      'fuzz-secret-value',
    );
  }
  const ask = await cardRequests(s);

  const failures: unknown[] = [];
  const tally: Record<string, number> = {};
  for (const c of cases) {
    const allow = CREDS[c.cred]!;
    const verdicts = c.addresses.map((a) => ({ a, o: judge(a, allow), p: C.classifyAddress(a, allow) }));
    const { status, text, err, card, outcome } = await ask({
      credential: c.cred,
      method: 'GET',
      url: s.url(c.name, '/x'),
    });
    const row = { seed: SEED, ...c, status: status, code: err?.code, errAddress: err?.address };
    tally[outcome] = (tally[outcome] ?? 0) + 1;
    if (card) {
      // Would have connected: every address must be reachable.
      const shown = String(card.action['address']);
      if (!same(shown, c.addresses[0]!)) failures.push({ ...row, why: `card shows ${shown}` });
      const blocked = verdicts.find((v) => v.o.verdict === 'must_block' || !v.p.allowed);
      if (blocked) failures.push({ ...row, why: `card for ${blocked.a}: oracle ${blocked.o.why}` });
      if (status !== 403 || err?.code !== 'denied_by_user') failures.push({ ...row, why: 'denied card' });
    } else if (err?.code === 'denied_address') {
      const named = verdicts.find((v) => err.address !== undefined && same(v.a, err.address));
      if (!named) failures.push({ ...row, why: 'refusal names an address not answered' });
      else if (named.o.verdict === 'must_allow') failures.push({ ...row, why: `refused ${named.a}: ${named.o.why}` });
      if (verdicts.every((v) => v.p.allowed)) failures.push({ ...row, why: 'classifier allows all, daemon refused' });
    } else {
      failures.push({ ...row, why: `unexpected outcome ${text.slice(0, 300)}` });
    }
  }
  t.same(failures.slice(0, 20), [], `${failures.length} of ${cases.length} requests disagree (seed ${SEED})`);
  t.comment(`outcomes: ${JSON.stringify(tally)}`);
  t.ok((tally['card'] ?? 0) > 10 && (tally['denied_address'] ?? 0) > 10, 'both outcomes exercised');
  t.equal(s.up.requests.length, 0, 'the upstream saw no request');
  t.equal(s.up.connections(), 0, 'and no connection');
  const health = await s.request({ credential: 'none', method: 'GET', url: s.url('n0.fuzz.test', '/x') });
  t.ok(health.status === 403, 'the daemon still serves');
});
