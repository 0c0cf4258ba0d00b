// The stub DNS client against real UDP and TCP servers on loopback that
// answer however the test says: spoofed and stray answers ignored, hostile
// answers EBADRESP (never a throw or a hang), TC retried over TCP, sockets
// reused and retired, many queries matched to their answers, an
// unreachable server skipped, a silent one timing out. And the parsing of
// /etc/resolv.conf.
import t, { Test } from 'tap';
import { createSocket, RemoteInfo, Socket } from 'node:dgram';
import { createServer, Server } from 'node:net';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as dnsPacket from 'dns-packet';
import { DnsClient, Outcome } from '../../daemon/pipeline/dns/client';
import { parseResolvConf, SystemServers } from '../../daemon/pipeline/dns/system-servers';
import type { DnsServer } from '../../shared/config';

type Reply = (buf: Buffer) => void;
type Handler = (query: Buffer, reply: Reply, from: RemoteInfo) => void;

interface Raw {
  server: DnsServer;
  ports: number[]; // the source port of every query received
  tcpQueries: number;
  socket: Socket;
}

async function rawServer(t: Test, onUdp: Handler, onTcp?: (query: Buffer) => Buffer): Promise<Raw> {
  const socket = createSocket('udp4');
  const raw: Raw = { server: { address: '127.0.0.1', port: 0, family: 4 }, ports: [], tcpQueries: 0, socket };
  socket.on('message', (msg, from) => {
    raw.ports.push(from.port);
    onUdp(msg, (buf) => socket.send(buf, from.port, from.address), from);
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  raw.server.port = socket.address().port;
  let tcp: Server | undefined;
  if (onTcp) {
    tcp = createServer((conn) => {
      let got = Buffer.alloc(0);
      conn.on('data', (chunk: Buffer) => {
        got = Buffer.concat([got, chunk]);
        if (got.length < 2 || got.length < 2 + got.readUInt16BE(0)) return;
        raw.tcpQueries++;
        const answer = onTcp(got.subarray(2, 2 + got.readUInt16BE(0)));
        const len = Buffer.alloc(2);
        len.writeUInt16BE(answer.length);
        conn.end(Buffer.concat([len, answer]));
      });
    });
    await new Promise<void>((resolve) => tcp!.listen(raw.server.port, '127.0.0.1', resolve));
  }
  t.teardown(async () => {
    await new Promise<void>((resolve) => socket.close(() => resolve()));
    if (tcp) await new Promise<void>((resolve) => tcp!.close(() => resolve()));
  });
  return raw;
}

// The question section exactly as the query has it (name, type, class).
function questionBytes(query: Buffer): Buffer {
  let at = 12;
  while (query[at] !== 0) at += query[at]! + 1;
  return query.subarray(12, at + 5);
}

// A response built by hand: header, the echoed question, then `answers`
// (raw resource records) counted as `ancount`.
function raw(query: Buffer, opts: { flags?: number; ancount?: number; answers?: Buffer; id?: number } = {}): Buffer {
  const header = Buffer.alloc(12);
  header.writeUInt16BE(opts.id ?? query.readUInt16BE(0), 0);
  header.writeUInt16BE(opts.flags ?? 0x8180, 2);
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(opts.ancount ?? 0, 6);
  return Buffer.concat([header, questionBytes(query), opts.answers ?? Buffer.alloc(0)]);
}

// An A record: owner given as raw bytes (a pointer 0xc00c is the question).
function aRecord(owner: Buffer, address: number[], ttl = 60): Buffer {
  const fixed = Buffer.alloc(10);
  fixed.writeUInt16BE(1, 0);
  fixed.writeUInt16BE(1, 2);
  fixed.writeUInt32BE(ttl, 4);
  fixed.writeUInt16BE(4, 8);
  return Buffer.concat([owner, fixed, Buffer.from(address)]);
}

const QNAME = Buffer.from([0xc0, 0x0c]);

function answer(query: Buffer, records: dnsPacket.Answer[], rcode = 0, extra: Partial<dnsPacket.Packet> = {}): Buffer {
  const q = dnsPacket.decode(query);
  return dnsPacket.encode({
    type: 'response',
    id: q.id ?? 0,
    flags: dnsPacket.RECURSION_DESIRED | dnsPacket.RECURSION_AVAILABLE | rcode,
    questions: q.questions ?? [],
    answers: records,
    ...extra,
  });
}

function question(query: Buffer): { name: string; type: string } {
  const q = dnsPacket.decode(query).questions![0]!;
  return { name: q.name, type: q.type };
}

function aFor(query: Buffer, address: string, ttl = 60): dnsPacket.Answer {
  return { type: 'A', name: question(query).name, ttl, class: 'IN', data: address };
}

const ok = (addresses: string[], ttl = 60): Outcome => ({
  ok: true,
  records: addresses.map((address) => ({ address, ttl })),
});

t.test('spoofed and stray answers are ignored; the real answer is then accepted', async (t) => {
  const other = createSocket('udp4');
  await new Promise<void>((resolve) => other.bind(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => other.close(() => resolve())));
  const s = await rawServer(t, (query, reply, from) => {
    const id = query.readUInt16BE(0);
    const q = dnsPacket.decode(query);
    const spoof = (p: Partial<dnsPacket.Packet>): Buffer =>
      dnsPacket.encode({
        type: 'response',
        id,
        flags: dnsPacket.RECURSION_AVAILABLE,
        questions: q.questions ?? [],
        answers: [{ type: 'A', name: question(query).name, ttl: 60, class: 'IN', data: '6.6.6.6' }],
        ...p,
      });
    reply(spoof({ id: id ^ 1 })); // wrong id
    reply(spoof({ questions: [{ type: 'A', name: 'other.test', class: 'IN' }] })); // wrong question
    reply(spoof({ questions: [{ type: 'AAAA', name: question(query).name, class: 'IN' }] })); // wrong type
    reply(spoof({ type: 'query' })); // QR not set
    other.send(spoof({}), from.port, from.address); // right everything, from another port
    setTimeout(() => reply(answer(query, [aFor(query, '192.0.2.1')])), 50);
  });
  const client = new DnsClient();
  t.same(await client.query([s.server], 'app.test', 1, 2000), ok(['192.0.2.1']));
  t.same(await client.query([s.server], 'APP.Test.', 1, 2000), ok(['192.0.2.1']), 'the echo compared without case');
});

t.test('hostile answers: EBADRESP, never a throw or a hang', async (t) => {
  const hostile: Record<string, (q: Buffer) => Buffer> = {
    truncated: (q) => raw(q, { ancount: 1, answers: aRecord(QNAME, [192, 0, 2, 1]).subarray(0, 12) }),
    'count past the end': (q) => raw(q, { ancount: 3, answers: aRecord(QNAME, [192, 0, 2, 1]) }),
    // The answer's owner is a pointer to itself.
    'compression loop': (q) =>
      raw(q, { ancount: 1, answers: aRecord(Buffer.from([0xc0, 12 + questionBytes(q).length]), [192, 0, 2, 1]) }),
    'pointer past the end': (q) => raw(q, { ancount: 1, answers: aRecord(Buffer.from([0xff, 0xff]), [192, 0, 2, 1]) }),
    'label over 63': (q) =>
      raw(q, {
        ancount: 1,
        answers: aRecord(Buffer.concat([Buffer.from([64]), Buffer.alloc(64, 0x61), Buffer.from([0])]), [1, 2, 3, 4]),
      }),
    'A record of 5 bytes': (q) => {
      const r = aRecord(QNAME, [192, 0, 2, 1]);
      r.writeUInt16BE(5, 10);
      return raw(q, { ancount: 1, answers: Buffer.concat([r, Buffer.from([9])]) });
    },
    'CNAME loop': (q) =>
      answer(q, [
        { type: 'CNAME', name: question(q).name, ttl: 60, class: 'IN', data: 'b.test' },
        { type: 'CNAME', name: 'b.test', ttl: 60, class: 'IN', data: question(q).name },
      ]),
    'chain too long': (q) =>
      answer(q, [
        { type: 'CNAME', name: question(q).name, ttl: 60, class: 'IN', data: 'c0.test' },
        ...Array.from({ length: 20 }, (_, i): dnsPacket.Answer => ({
          type: 'CNAME',
          name: `c${i}.test`,
          ttl: 60,
          class: 'IN',
          data: `c${i + 1}.test`,
        })),
        { type: 'A', name: 'c20.test', ttl: 60, class: 'IN', data: '192.0.2.1' },
      ]),
  };
  const s = await rawServer(t, (query, reply) =>
    reply(hostile[question(query).name.split('.')[0]!.replace(/_/g, ' ')]!(query)),
  );
  const client = new DnsClient();
  for (const name of Object.keys(hostile)) {
    const start = Date.now();
    t.same(
      await client.query([s.server], `${name.replace(/ /g, '_')}.test`, 1, 2000),
      { ok: false, code: 'EBADRESP' },
      name,
    );
    t.ok(Date.now() - start < 1000, `${name}: at once`);
  }
});

t.test('CNAME chains within the answer, RCODEs, NODATA, bad names', async (t) => {
  const s = await rawServer(t, (query, reply) => {
    const { name } = question(query);
    const label = name.split('.')[0]!;
    if (label === 'alias')
      return reply(
        answer(query, [
          { type: 'A', name: 'unrelated.test', ttl: 60, class: 'IN', data: '6.6.6.6' },
          { type: 'CNAME', name, ttl: 30, class: 'IN', data: 'Target.test' },
          { type: 'A', name: 'target.test', ttl: 300, class: 'IN', data: '192.0.2.9' },
          { type: 'A', name, ttl: 60, class: 'IN', data: '6.6.6.7' }, // beside its own CNAME: not the chain's end
        ]),
      );
    const rcodes: Record<string, number> = { formerr: 1, servfail: 2, nxdomain: 3, notimp: 4, refused: 5, other: 9 };
    reply(answer(query, [], rcodes[label] ?? 0));
  });
  const client = new DnsClient();
  t.same(
    await client.query([s.server], 'alias.test', 1, 2000),
    ok(['192.0.2.9'], 30),
    'the end of the chain, TTL capped',
  );
  for (const [label, code] of [
    ['formerr', 'EFORMERR'],
    ['servfail', 'ESERVFAIL'],
    ['nxdomain', 'ENOTFOUND'],
    ['notimp', 'ENOTIMP'],
    ['refused', 'EREFUSED'],
    ['other', 'EBADRESP'],
    ['nodata', 'ENODATA'],
  ] as const) {
    t.same(await client.query([s.server], `${label}.test`, 28, 2000), { ok: false, code }, label);
  }
  s.ports.length = 0;
  for (const bad of [
    `${'a'.repeat(64)}.test`,
    `${'abcdefgh.'.repeat(28)}test`,
    'a..test',
    '.',
    '',
    'bücher.test',
    'a b.test',
    'a\\.test',
  ]) {
    t.same(await client.query([s.server], bad, 1, 2000), { ok: false, code: 'EBADNAME' }, JSON.stringify(bad));
  }
  t.same(s.ports, [], 'no query sent for a bad name');
  t.same(
    await client.query([s.server], `${'a'.repeat(63)}.test.`, 1, 2000),
    { ok: false, code: 'ENODATA' },
    '63 and a trailing dot',
  );
});

t.test('TC: the query is asked again over TCP, once', async (t) => {
  const s = await rawServer(
    t,
    (query, reply) => reply(raw(query, { flags: 0x8380 })), // QR RD TC RA
    (query) =>
      question(query).name === 'again.test'
        ? raw(query, { flags: 0x8380 })
        : answer(
            query,
            Array.from({ length: 100 }, (_, i) => aFor(query, `192.0.2.${i}`)),
          ),
  );
  const client = new DnsClient();
  const r = await client.query([s.server], 'big.test', 1, 2000);
  t.same(r, ok(Array.from({ length: 100 }, (_, i) => `192.0.2.${i}`)));
  t.equal(s.tcpQueries, 1);
  t.same(await client.query([s.server], 'again.test', 1, 2000), { ok: false, code: 'EBADRESP' }, 'TC over TCP');
  t.equal(s.tcpQueries, 2, 'no second TCP try');
});

t.test('sockets are reused, and retired after a number of queries or an age', async (t) => {
  const s = await rawServer(t, (query, reply) => reply(answer(query, [aFor(query, '192.0.2.1')])));
  const client = new DnsClient();
  for (let i = 0; i < 200; i += 4) {
    await Promise.all(Array.from({ length: 4 }, () => client.query([s.server], 'app.test', 1, 2000)));
  }
  const ports = new Set(s.ports).size;
  t.equal(s.ports.length, 200);
  t.ok(ports > 1 && ports <= 5, `200 queries from ${ports} source ports (64 queries each)`);

  s.ports.length = 0;
  const aged = new DnsClient({ maxQueries: 1000, maxAgeMs: 150 });
  await aged.query([s.server], 'app.test', 1, 2000);
  await aged.query([s.server], 'app.test', 1, 2000);
  await new Promise((r) => setTimeout(r, 250));
  await aged.query([s.server], 'app.test', 1, 2000);
  t.equal(new Set(s.ports.slice(0, 2)).size, 1, 'within its age: the same socket');
  t.not(s.ports[2], s.ports[0], 'after its age: a new socket');
});

t.test('many concurrent queries each get their own answer', async (t) => {
  const s = await rawServer(t, (query, reply) => {
    const n = Number(/^n(\d+)\./.exec(question(query).name)![1]);
    setTimeout(() => reply(answer(query, [aFor(query, `10.0.${n >> 8}.${n & 255}`)])), Math.random() * 50);
  });
  const client = new DnsClient({ maxQueries: 1000, maxAgeMs: 5000 });
  const results = await Promise.all(
    Array.from({ length: 200 }, (_, n) => client.query([s.server], `n${n}.test`, 1, 3000)),
  );
  t.same(
    results,
    Array.from({ length: 200 }, (_, n) => ok([`10.0.${n >> 8}.${n & 255}`])),
  );
  t.equal(new Set(s.ports).size, 1, 'all on one socket: ids kept apart');
});

t.test('an unreachable server is skipped; a silent one uses up the timeout', async (t) => {
  const gone = createSocket('udp4');
  await new Promise<void>((resolve) => gone.bind(0, '127.0.0.1', resolve));
  const dead: DnsServer = { address: '127.0.0.1', port: gone.address().port, family: 4 };
  await new Promise<void>((resolve) => gone.close(() => resolve()));

  const live = await rawServer(t, (query, reply) => reply(answer(query, [aFor(query, '192.0.2.1')])));
  const client = new DnsClient();
  t.same(await client.query([dead], 'app.test', 1, 2000), { ok: false, code: 'ECONNREFUSED' });
  const [a, aaaa] = await Promise.all([
    client.query([dead, live.server], 'app.test', 1, 2000),
    client.query([dead, live.server], 'app.test', 28, 2000),
  ]);
  t.same(a, ok(['192.0.2.1']), 'A from the second server');
  t.same(aaaa, { ok: false, code: 'ENODATA' }, 'AAAA too');

  const silent = await rawServer(t, () => {});
  const start = Date.now();
  t.same(await client.query([silent.server, live.server], 'app.test', 1, 200), { ok: false, code: 'ETIMEOUT' });
  const elapsed = Date.now() - start;
  t.ok(elapsed >= 190 && elapsed < 450, `gave up at the timeout (${elapsed} ms)`);
  t.equal(silent.ports.length, 1, 'asked once');

  const refusing = await rawServer(t, (query, reply) => reply(answer(query, [], 5)));
  t.same(
    await client.query([refusing.server, live.server], 'app.test', 1, 2000),
    { ok: false, code: 'EREFUSED' },
    'REFUSED is final',
  );
});

t.test('/etc/resolv.conf: nameserver lines, re-read when the file changes', async (t) => {
  t.same(
    parseResolvConf(
      '# comment\nsearch corp.lan\nnameserver 10.0.0.1\nnameserver  2001:db8::53 # trailing\n;nameserver 10.9.9.9\nnameserver fe80::1%eth0\nnameserver not-an-ip\noptions ndots:2\n',
    ),
    [
      { address: '10.0.0.1', port: 53, family: 4 },
      { address: '2001:db8::53', port: 53, family: 6 },
      { address: 'fe80::1%eth0', port: 53, family: 6 },
    ],
  );
  const dir = mkdtempSync(join(tmpdir(), 'resolv-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'resolv.conf');
  let now = 0;
  const sys = new SystemServers(file, () => now);
  const fallback = [
    { address: '127.0.0.1', port: 53, family: 4 },
    { address: '::1', port: 53, family: 6 },
  ];
  t.same(sys.current(), fallback, 'no file: loopback, as c-ares');
  writeFileSync(file, 'nameserver 10.0.0.1\n');
  t.same(sys.current(), fallback, 'not looked at again within a second');
  now = 1500;
  t.same(sys.current(), [{ address: '10.0.0.1', port: 53, family: 4 }]);
  writeFileSync(file, 'nameserver 10.0.0.2\nnameserver 10.0.0.3\n');
  now = 3000;
  t.same(
    sys.current().map((s) => s.address),
    ['10.0.0.2', '10.0.0.3'],
    'changed: read again',
  );
  writeFileSync(file, 'search corp.lan\n');
  now = 4500;
  t.same(sys.current(), fallback, 'none listed: loopback');
});
