// The stub resolver against randomised hostile DNS answers, through the
// real daemon (SPEC §6.2, §6.3). The test's own UDP+TCP server (one port)
// answers each query from a seeded plan: forged datagrams first (another
// id, another question name or type, QR clear, two questions, an opcode,
// the right everything from another local socket), each naming a POISON
// address; then the genuine answer, well-formed or not: plain records (TTL
// 0 included, duplicates, public and private mixed), CNAME chains (long,
// looping, ending at a private address), A records in the authority and
// additional sections or for other owners or of class CH (poison), answer
// counts that lie, packets cut short, compression pointers that loop, point
// forward or into the header, TC with the real answer over TCP, every
// RCODE, a huge answer, silence, and an answer after the timeout.
// The approver denies every card, so nothing is ever sent; a card is the
// address the daemon would have connected to. Invariants: a card shows the
// first address of the genuine answer, never a poison one; refusals are
// exactly denied_address (naming the expected address) or dns_error; the
// daemon answers every request and stays up.
import t from 'tap';
import { createSocket } from 'node:dgram';
import * as dnsPacket from 'dns-packet';
import { startStack } from '../helpers/stack';
import { canConnect } from '../helpers/postern';
import { question, questionBytes, QNAME_PTR, rr, startRawDns, wireName } from '../helpers/raw-dns';
import { cardRequests } from '../helpers/card-requests';
import { Gen, prng, fuzzSeed } from '../helpers/address-oracle';

const SEED = fuzzSeed();
const CASES = 100;

// ---- wire pieces (by hand: the point is answers no encoder would make)
const ipBytes = (a: string): Buffer => Buffer.from(a.split('.').map(Number));
const aRec = (owner: Buffer, a: string, ttl = 60, cls = 1): Buffer => rr(owner, 1, ipBytes(a), ttl, cls);
const cnameRec = (owner: Buffer, target: string): Buffer => rr(owner, 5, wireName(target));
interface Hdr {
  id: number;
  flags?: number;
  qd?: number;
  an: number;
  ns?: number;
  ar?: number;
}
function msg(h: Hdr, q: Buffer, ...rest: Buffer[]): Buffer {
  const b = Buffer.alloc(12);
  b.writeUInt16BE(h.id, 0);
  b.writeUInt16BE(h.flags ?? 0x8180, 2);
  b.writeUInt16BE(h.qd ?? 1, 4);
  b.writeUInt16BE(h.an, 6);
  b.writeUInt16BE(h.ns ?? 0, 8);
  b.writeUInt16BE(h.ar ?? 0, 10);
  return Buffer.concat([b, q, ...rest]);
}

// ---- plans
type Expect = { kind: 'card'; address: string } | { kind: 'denied'; address: string } | { kind: 'dns_error' };
interface Plan {
  what: string;
  forged: string[]; // kinds of forged datagrams sent first
  // Builds the genuine UDP answer (null: stay silent); `late`: send it
  // after the client gave up.
  udp: (id: number, q: Buffer, name: string) => Buffer | null;
  tcp?: (id: number, q: Buffer, name: string) => Buffer;
  late?: boolean;
  expect: Expect;
}

const FORGERIES = ['id', 'name', 'type', 'qr', 'qd2', 'opcode', 'socket'];

function makePlan(g: Gen, i: number): Plan {
  const pub = (k: number): string => `9.${(i >> 8) & 255}.${i & 255}.${k + 1}`;
  const forged = Array.from({ length: g.int(3) }, () => g.pick(FORGERIES));
  const plain =
    (addrs: string[], ttl = 60) =>
    (id: number, q: Buffer) =>
      msg({ id, an: addrs.length }, q, ...addrs.map((a) => aRec(QNAME_PTR, a, ttl)));
  const kind = g.int(19);
  switch (kind) {
    case 0: {
      const n = 1 + g.int(5);
      const addrs = Array.from({ length: n }, (_, k) => pub(k));
      if (g.int(2)) addrs.push(addrs[0]!); // a duplicate
      return {
        what: `${n} records`,
        forged,
        udp: plain(addrs, g.pick([0, 1, 60, 0x7fffffff, 0xffffffff])),
        expect: { kind: 'card', address: addrs[0]! },
      };
    }
    case 1: {
      const priv = g.pick(['10.1.2.3', '127.0.0.2', '169.254.169.254', '192.168.1.1', '100.64.0.1']);
      const addrs = [pub(0), pub(1)];
      addrs.splice(g.int(3), 0, priv);
      return { what: `mixed with ${priv}`, forged, udp: plain(addrs), expect: { kind: 'denied', address: priv } };
    }
    case 2: {
      const len = 1 + g.int(20);
      const end = g.int(3) === 0 ? '172.16.9.9' : pub(0);
      const beside = g.int(2) === 1;
      return {
        what: `CNAME chain of ${len} to ${end}`,
        forged,
        udp: (id, q, name) => {
          const recs: Buffer[] = [];
          let owner: Buffer = QNAME_PTR;
          for (let k = 0; k < len; k++) {
            const target = `l${k}.chain.${name}`;
            recs.push(cnameRec(owner, target));
            owner = wireName(target);
          }
          recs.push(aRec(owner, end));
          if (beside) recs.push(aRec(QNAME_PTR, '1.2.3.4')); // beside its CNAME: poison
          return msg({ id, an: recs.length }, q, ...recs);
        },
        expect:
          len > 16
            ? { kind: 'dns_error' }
            : end === '172.16.9.9'
              ? { kind: 'denied', address: end }
              : { kind: 'card', address: end },
      };
    }
    case 3:
      return {
        what: 'CNAME loop',
        forged,
        udp: (id, q, name) =>
          msg(
            { id, an: 3 },
            q,
            cnameRec(QNAME_PTR, `x.${name}`),
            cnameRec(wireName(`x.${name}`), name),
            aRec(QNAME_PTR, '1.2.3.4'),
          ),
        expect: { kind: 'dns_error' },
      };
    case 4:
      return {
        what: 'A records in authority and additional (poison)',
        forged,
        udp: (id, q) =>
          msg(
            { id, an: 1, ns: 1, ar: 2 },
            q,
            aRec(QNAME_PTR, pub(0)),
            aRec(QNAME_PTR, '1.2.3.4'),
            aRec(QNAME_PTR, '1.2.3.5'),
            aRec(QNAME_PTR, '10.0.0.1'),
          ),
        expect: { kind: 'card', address: pub(0) },
      };
    case 5: {
      const extra = 2 + g.int(300);
      return {
        what: 'ANCOUNT larger than the records',
        forged,
        udp: (id, q) => msg({ id, an: extra }, q, aRec(QNAME_PTR, pub(0))),
        expect: { kind: 'dns_error' },
      };
    }
    case 6:
      return {
        what: 'ANCOUNT smaller than the records (the rest is poison)',
        forged,
        udp: (id, q) =>
          msg({ id, an: 1 }, q, aRec(QNAME_PTR, pub(0)), aRec(QNAME_PTR, '1.2.3.4'), aRec(QNAME_PTR, '10.9.9.9')),
        expect: { kind: 'card', address: pub(0) },
      };
    case 7: {
      const cut = g.rnd();
      return {
        what: 'packet cut short',
        forged,
        udp: (id, q) => {
          const full = msg({ id, an: 2 }, q, aRec(QNAME_PTR, pub(0)), aRec(QNAME_PTR, pub(1)));
          const qend = 12 + q.length;
          return full.subarray(0, qend + 1 + Math.floor(cut * (full.length - qend - 1)));
        },
        expect: { kind: 'dns_error' },
      };
    }
    case 8: {
      const how = g.pick(['self', 'forward', 'header', 'two-step loop']);
      const into = g.int(12);
      return {
        what: `compression pointer: ${how}`,
        forged,
        udp: (id, q) => {
          const at = 12 + q.length;
          let owner: Buffer;
          if (how === 'self') owner = Buffer.from([0xc0 | (at >> 8), at & 0xff]);
          else if (how === 'forward') owner = Buffer.from([0xc0 | ((at + 20) >> 8), (at + 20) & 0xff]);
          else if (how === 'header') owner = Buffer.from([0xc0, into]);
          else owner = Buffer.from([1, 0x61, 0xc0 | ((at + 2) >> 8), (at + 2) & 0xff]);
          return msg({ id, an: 1 }, q, aRec(owner, '1.2.3.4'));
        },
        expect: { kind: 'dns_error' },
      };
    }
    case 9:
      return {
        what: 'TC over UDP (poison), the TCP answer is genuine',
        forged,
        udp: (id, q) => msg({ id, an: 1, flags: 0x8380 }, q, aRec(QNAME_PTR, '1.2.3.4')),
        tcp: plain([pub(0), pub(1)]),
        expect: { kind: 'card', address: pub(0) },
      };
    case 10: {
      const rcode = 1 + g.int(15);
      return {
        what: `RCODE ${rcode}`,
        forged,
        udp: (id, q) => msg({ id, an: 1, flags: 0x8180 | rcode }, q, aRec(QNAME_PTR, '1.2.3.4')),
        expect: { kind: 'dns_error' },
      };
    }
    case 11: {
      const n = 200 + g.int(300);
      const last = g.int(2) ? '192.168.200.1' : pub(2);
      return {
        what: `huge answer: ${n} records over UDP, last ${last}`,
        forged,
        udp: (id, q) =>
          msg({ id, an: n + 1 }, q, ...Array.from({ length: n }, () => aRec(QNAME_PTR, pub(0))), aRec(QNAME_PTR, last)),
        expect: last === pub(2) ? { kind: 'card', address: pub(0) } : { kind: 'denied', address: last },
      };
    }
    case 12:
      return { what: 'silence', forged, udp: () => null, expect: { kind: 'dns_error' } };
    case 13:
      return {
        what: 'the answer after the timeout',
        forged,
        udp: plain(['1.2.3.4']),
        late: true,
        expect: { kind: 'dns_error' },
      };
    case 14:
      return {
        what: 'A with a wrong RDLENGTH',
        forged,
        udp: (id, q) => msg({ id, an: 1 }, q, rr(QNAME_PTR, 1, Buffer.from([1, 2, 3, 4, 5]))),
        expect: { kind: 'dns_error' },
      };
    case 15:
      return {
        what: 'class CH and other owners (poison) beside a genuine record',
        forged,
        udp: (id, q, name) =>
          msg(
            { id, an: 3 },
            q,
            aRec(QNAME_PTR, '1.2.3.4', 60, 3),
            aRec(wireName(`other.${name}`), '1.2.3.5'),
            aRec(QNAME_PTR, pub(0)),
          ),
        expect: { kind: 'card', address: pub(0) },
      };
    case 16:
      return {
        what: 'no records (NODATA)',
        forged,
        udp: (id, q) => msg({ id, an: 0 }, q),
        expect: { kind: 'dns_error' },
      };
    case 17:
      return {
        what: 'the question name compressed into the header',
        forged,
        udp: (id) => {
          const q = Buffer.from([0xc0, 0x04, 0, 1, 0, 1]);
          return msg({ id, an: 1 }, q, aRec(QNAME_PTR, '1.2.3.4'));
        },
        expect: { kind: 'dns_error' },
      };
    default:
      return {
        what: 'TTL 0 and a CNAME with a private end in authority (poison)',
        forged,
        udp: (id, q, name) =>
          msg(
            { id, an: 1, ns: 2 },
            q,
            aRec(QNAME_PTR, pub(0), 0),
            cnameRec(QNAME_PTR, `p.${name}`),
            aRec(wireName(`p.${name}`), '10.0.0.1'),
          ),
        expect: { kind: 'card', address: pub(0) },
      };
  }
}

const POISON = /^1\.2\.3\./;

function forgery(kind: string, id: number, q: Buffer, name: string): Buffer {
  const poison = aRec(QNAME_PTR, '1.2.3.4');
  switch (kind) {
    case 'id':
      return msg({ id: id ^ 0x5a5a, an: 1 }, q, poison);
    case 'name':
      return dnsPacket.encode({
        type: 'response',
        id,
        flags: dnsPacket.RECURSION_AVAILABLE,
        questions: [{ type: 'A', name: `z${name}`, class: 'IN' }],
        answers: [{ type: 'A', name: `z${name}`, ttl: 60, class: 'IN', data: '1.2.3.4' }],
      });
    case 'type': {
      const qq = Buffer.from(q);
      qq.writeUInt16BE(28, qq.length - 4);
      return msg({ id, an: 1 }, qq, poison);
    }
    case 'qr':
      return msg({ id, an: 1, flags: 0x0100 }, q, poison);
    case 'qd2':
      return msg({ id, an: 1, qd: 2 }, Buffer.concat([q, q]), poison);
    case 'opcode':
      return msg({ id, an: 1, flags: 0x8980 }, q, poison);
    default:
      return msg({ id, an: 1 }, q, poison); // sent from another socket
  }
}

t.test(`randomised hostile DNS answers (seed ${SEED})`, async (t) => {
  const g = new Gen(prng(SEED));
  const plans = Array.from({ length: CASES }, (_, i) => makePlan(g, i));
  const other = createSocket('udp4'); // a second source for forged answers
  await new Promise<void>((r) => other.bind(0, '127.0.0.1', r));
  const timers = new Set<NodeJS.Timeout>();
  const dns = await startRawDns(
    (query, reply, from) => {
      const id = query.readUInt16BE(0);
      const q = questionBytes(query);
      const { name, type } = question(query);
      const m = /^c(\d+)\.hostile\.test$/.exec(name);
      if (type !== 'A' || !m) return reply(msg({ id, an: 0 }, q)); // AAAA: NODATA
      const plan = plans[Number(m[1])]!;
      for (const f of plan.forged) {
        const forged = forgery(f, id, q, name);
        if (f === 'socket') other.send(forged, from.port, from.address);
        else reply(forged);
      }
      const genuine = plan.udp(id, q, name);
      if (!genuine) return;
      if (plan.late) timers.add(setTimeout(() => reply(genuine), 1500));
      else reply(genuine);
    },
    (query) => {
      const name = question(query).name;
      const plan = plans[Number(/^c(\d+)\./.exec(name)?.[1] ?? -1)];
      return (
        plan?.tcp?.(query.readUInt16BE(0), questionBytes(query), name) ?? msg({ id: 0, an: 0 }, questionBytes(query))
      );
    },
  );
  t.teardown(async () => {
    for (const x of timers) clearTimeout(x);
    await new Promise<void>((r) => other.close(() => r()));
    await dns.close();
  });
  const s = await startStack({ names: ['*.hostile.test'], dnsPort: dns.port, httpConfig: 'timeout = "1s"' });
  t.teardown(() => s.close());
  s.addCredential(
    'h',
    `name = "h"\nkind = "http"\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n` +
      `[[allow]]\nhost = "*.hostile.test"\nports = [${s.up.port}]\n`,
    'fuzz-secret-value',
  );
  const ask = await cardRequests(s);

  const failures: unknown[] = [];
  const tally: Record<string, number> = {};
  for (const [i, plan] of plans.entries()) {
    const { status, text, err, card } = await ask({
      credential: 'h',
      method: 'GET',
      url: s.url(`c${i}.hostile.test`, '/x'),
    });
    const got = card
      ? `card ${String(card.action['address'])}`
      : err?.code === 'denied_address'
        ? `denied ${err.address}`
        : (err?.code ?? `status ${status}`);
    tally[got.split(' ')[0]!] = (tally[got.split(' ')[0]!] ?? 0) + 1;
    const want = plan.expect.kind === 'dns_error' ? 'dns_error' : `${plan.expect.kind} ${plan.expect.address}`;
    if (got !== want || (card && POISON.test(String(card.action['address'])))) {
      failures.push({
        seed: SEED,
        case: i,
        what: plan.what,
        forged: plan.forged,
        want,
        got,
        message: text.slice(0, 300),
      });
    }
    if (!card && err?.code === 'dns_error' && status !== 502) failures.push({ case: i, what: plan.what, status });
  }
  t.same(failures.slice(0, 20), [], `${failures.length} of ${CASES} hostile answers misjudged (seed ${SEED})`);
  t.comment(`outcomes: ${JSON.stringify(tally)}`);
  t.equal(s.up.requests.length, 0, 'the upstream saw no request');
  t.equal(s.up.connections(), 0, 'and no connection');
  t.ok(await canConnect(s.sock), 'the daemon still serves');
});
