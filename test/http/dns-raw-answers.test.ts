// DNS answers built byte by byte, through the real daemon (SPEC §6.2,
// §6.3). The test's own UDP and TCP DNS server (not the zone helper, which
// only sends well-formed answers) decides every datagram:
// - forged answers sent before the genuine one (another id, another
//   question, another type, QR clear, a second question, the right
//   everything from another source port), each naming an address the
//   credential allows, while the genuine answer names a private one: the
//   request must be judged on the genuine answer alone;
// - a truncated (TC) UDP answer naming only an allowed address, and the TCP
//   answer to the retry naming 202 addresses, the last one private: the
//   TCP answer is the one judged, every one of its addresses, and exactly
//   one TCP query is made;
// - a CNAME from the question to a name outside it, that name's private
//   address, and an allowed record for the question name beside its CNAME:
//   the end of the chain is what counts;
// - malformed answers (a compression pointer to itself, a label over 63
//   bytes, an owner name over 255 bytes): dns_error, and the daemon keeps
//   serving.
// Each refusal: exact status and code, journaled, no request and no
// connection at the upstream. Only 127.0.0.1 is ever approved.
import t, { Test } from 'tap';
import { createSocket } from 'node:dgram';
import { join } from 'node:path';
import { mkdirSync, writeFileSync } from 'node:fs';
import * as dnsPacket from 'dns-packet';
import { QNAME_PTR, question, questionBytes, rr, startRawDns, wireName } from '../helpers/raw-dns';
import { cli, init, makeHome, startDaemon, agentRequest, PASSPHRASE } from '../helpers/postern';
import { makeTestCa, startHttpsUpstream, echo } from '../helpers/https-upstream';
import { TestAdmin } from '../helpers/admin';
import { findCanary, journalBytes, journalText, makeCanary } from '../helpers/canary';

// A response by hand: header (id, flags, qdcount, ancount), the given
// question bytes, then raw resource records.
function response(
  id: number,
  qbytes: Buffer,
  records: Buffer[],
  o: { flags?: number; qdcount?: number; ancount?: number } = {},
): Buffer {
  const header = Buffer.alloc(12);
  header.writeUInt16BE(id, 0);
  header.writeUInt16BE(o.flags ?? 0x8180, 2); // QR RD RA, NOERROR
  header.writeUInt16BE(o.qdcount ?? 1, 4);
  header.writeUInt16BE(o.ancount ?? records.length, 6);
  return Buffer.concat([header, qbytes, ...records]);
}

const a = (owner: Buffer, address: string): Buffer => rr(owner, 1, Buffer.from(address.split('.').map(Number)));
const cname = (owner: Buffer, target: string): Buffer => rr(owner, 5, wireName(target));

// NOERROR, no records (NODATA): what every AAAA query here gets.
const nodata = (query: Buffer): Buffer => response(query.readUInt16BE(0), questionBytes(query), []);

const MANY = Array.from({ length: 200 }, (_, i) => `127.0.2.${i}`);

interface ErrorBody {
  error: { code: string; message: string; audit_seq: unknown; address?: string; reason?: string };
}

t.test('hand-built DNS answers through the real daemon', async (t) => {
  const other = createSocket('udp4'); // a second source for forged answers
  await new Promise<void>((resolve) => other.bind(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => other.close(() => resolve())));

  const dns = await startRawDns(
    (query, reply, from) => {
      const id = query.readUInt16BE(0);
      const q = question(query);
      const qb = questionBytes(query);
      if (q.type !== 'A') return reply(nodata(query));
      const label = q.name.split('.')[0];
      if (label === 'forged') {
        const allowed = [a(QNAME_PTR, '127.0.0.1')];
        reply(response(id ^ 0x5a5a, qb, allowed)); // another id
        const otherName = dnsPacket.encode({
          type: 'response',
          id,
          flags: dnsPacket.RECURSION_AVAILABLE,
          questions: [{ type: 'A', name: 'forged2.raw.test', class: 'IN' }],
          answers: [{ type: 'A', name: 'forged2.raw.test', ttl: 60, class: 'IN', data: '127.0.0.1' }],
        });
        reply(otherName); // another question
        const aaaaQuestion = Buffer.from(qb);
        aaaaQuestion.writeUInt16BE(28, aaaaQuestion.length - 4);
        reply(response(id, aaaaQuestion, allowed)); // another type
        reply(response(id, qb, allowed, { flags: 0x0100 })); // QR clear: a query, not an answer
        reply(response(id, Buffer.concat([qb, qb]), [a(QNAME_PTR, '127.0.0.1')], { qdcount: 2 })); // two questions
        other.send(response(id, qb, allowed), from.port, from.address); // right everything, wrong source port
        setTimeout(() => reply(response(id, qb, [a(QNAME_PTR, '10.0.0.9')])), 100);
        return;
      }
      if (label === 'big') {
        // TC: what fitted names only the allowed address.
        return reply(response(id, qb, [a(QNAME_PTR, '127.0.0.1')], { flags: 0x8380 }));
      }
      if (label === 'alias') {
        return reply(
          response(id, qb, [
            cname(QNAME_PTR, 'target.elsewhere.test'),
            a(wireName('target.elsewhere.test'), '10.0.0.9'),
            a(QNAME_PTR, '127.0.0.1'), // beside its own CNAME: not the end of the chain
          ]),
        );
      }
      if (label === 'pointer-loop') {
        const at = 12 + qb.length; // the owner points at itself
        return reply(response(id, qb, [a(Buffer.from([0xc0 | (at >> 8), at & 0xff]), '127.0.0.1')]));
      }
      if (label === 'long-label') {
        const owner = Buffer.concat([Buffer.from([64]), Buffer.alloc(64, 0x61), Buffer.from([0])]);
        return reply(response(id, qb, [a(owner, '127.0.0.1')]));
      }
      if (label === 'long-name') {
        // 5 labels of 63 bytes: 320 bytes of name, over the 255 allowed.
        const owner = Buffer.concat([
          ...Array.from({ length: 5 }, () => Buffer.concat([Buffer.from([63]), Buffer.alloc(63, 0x62)])),
          Buffer.from([0]),
        ]);
        return reply(response(id, qb, [a(owner, '127.0.0.1')]));
      }
      // Everything else: 127.0.0.1.
      reply(response(id, qb, [a(QNAME_PTR, '127.0.0.1')]));
    },
    (query) => {
      const id = query.readUInt16BE(0);
      const q = question(query);
      if (q.type !== 'A') return nodata(query);
      return response(
        id,
        questionBytes(query),
        ['127.0.0.1', ...MANY, '10.0.0.9'].map((addr) => a(QNAME_PTR, addr)),
      );
    },
  );
  t.teardown(() => dns.close());

  const ca = makeTestCa(['*.raw.test']);
  t.teardown(() => ca.cleanup());
  const up = await startHttpsUpstream(ca, echo);
  t.teardown(() => up.close());
  const P = up.port;
  const h = makeHome();
  t.teardown(() => h.cleanup());
  mkdirSync(h.home, { mode: 0o700 });
  writeFileSync(
    join(h.home, 'config.toml'),
    `[daemon]\n[http]\ndns_servers = ["127.0.0.1:${dns.port}"]\nca_file = "${ca.caFile}"\n[audit]\nrefusal_burst = 100000\n`,
    { mode: 0o600 },
  );
  t.equal(init(h).code, 0, 'init');
  const d = await startDaemon(h);
  t.teardown(() => d.stop());
  t.equal(cli(h, ['unlock', '--passphrase-file', h.passFile]).code, 0, 'unlock');
  const secret = makeCanary('TOKEN');
  const add = (name: string, allow: string): void => {
    const toml =
      `name = "${name}"\nkind = "http"\nallow_addresses = [${allow}]\n` +
      `[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n` +
      `[[allow]]\nhost = "*.raw.test"\nports = [${P}]\n`;
    const r = cli(h, [
      'cred',
      'add',
      '--file',
      h.file(`${name}.toml`, toml),
      '--secret-file',
      h.file(`${name}.secret`, secret),
      '--passphrase-file',
      h.passFile,
    ]);
    if (r.code !== 0) throw new Error(`cred add ${name}: ${r.stderr}`);
  };
  add('one', '"127.0.0.1/32"');
  add('eight', '"127.0.0.0/8"');

  const admin = await TestAdmin.connect(join(h.home, 'admin.sock'));
  t.teardown(() => admin.close());
  const att = await admin.request('approver.attach', {}, [Buffer.from(PASSPHRASE)]);
  t.equal(att['ok'], true, 'approver attached');
  const cardAddresses: unknown[] = [];
  admin.onPush = (f) => {
    if (f['push'] !== 'pending') return;
    const card = f['card'] as { id: string; process: { key: string }; action: Record<string, unknown> };
    cardAddresses.push(card.action['address']);
    const decision =
      card.action['address'] === '127.0.0.1'
        ? { decision: 'session', root_key: card.process.key }
        : { decision: 'deny' };
    void admin.request('approval.decide', { id: card.id, ...decision });
  };

  const sock = join(h.home, 'agent.sock');
  const texts: string[] = [];
  let lastSeq = 0;
  const send = async (cred: string, name: string) => {
    const r = await agentRequest(sock, 'POST', '/v1/http', {
      credential: cred,
      method: 'GET',
      url: `https://${name}:${P}/x`,
    });
    texts.push(r.text);
    return r;
  };
  const refused = async (
    t: Test,
    cred: string,
    name: string,
    status: number,
    code: string,
    check?: (err: ErrorBody['error']) => void,
  ): Promise<void> => {
    const before = { requests: up.requests.length, connections: up.connections() };
    const r = await send(cred, name);
    t.equal(r.status, status, r.text.slice(0, 800));
    const err = (r.json as ErrorBody | null)?.error;
    if (!err) return void t.fail(`no error body: ${r.text}`);
    t.equal(err.code, code);
    check?.(err);
    t.type(err.audit_seq, 'number', 'the refusal is journaled');
    t.ok((err.audit_seq as number) > lastSeq, 'with a new journal entry');
    lastSeq = err.audit_seq as number;
    t.equal(up.requests.length, before.requests, 'the upstream saw no request');
    t.equal(up.connections(), before.connections, 'no connection was made');
  };
  const count = (list: { name: string; type: string }[], name: string, type: string): number =>
    list.filter((q) => q.name === name && q.type === type).length;

  await t.test('forged answers before the genuine one are not used', (t) =>
    refused(t, 'one', 'forged.raw.test', 403, 'denied_address', (err) => {
      t.equal(err.address, '10.0.0.9', 'judged on the genuine answer');
      t.equal(err.reason, 'private');
      t.equal(count(dns.seen.udp, 'forged.raw.test', 'A'), 1, 'one A query');
    }),
  );

  await t.test('TC: the TCP answer is judged, all 202 of its addresses', (t) =>
    refused(t, 'eight', 'big.raw.test', 403, 'denied_address', (err) => {
      t.equal(err.address, '10.0.0.9', 'the last address of the TCP answer');
      t.equal(err.reason, 'private');
      t.match(err.message, /big\.raw\.test resolves to 127\.0\.0\.1, 127\.0\.2\.0, .*, \.\.\./);
      t.equal(count(dns.seen.udp, 'big.raw.test', 'A'), 1, 'one A query over UDP');
      t.equal(count(dns.seen.tcp, 'big.raw.test', 'A'), 1, 'then the same query once over TCP');
      t.equal(count(dns.seen.udp, 'big.raw.test', 'AAAA'), 1, 'one AAAA query');
    }),
  );

  await t.test('CNAME to a name outside the question: the end of the chain counts', (t) =>
    refused(t, 'one', 'alias.raw.test', 403, 'denied_address', (err) => {
      t.equal(err.address, '10.0.0.9');
      t.equal(err.reason, 'private');
    }),
  );

  for (const label of ['pointer-loop', 'long-label', 'long-name']) {
    await t.test(`${label}: a malformed answer is dns_error`, (t) =>
      refused(t, 'one', `${label}.raw.test`, 502, 'dns_error', (err) => {
        t.match(err.message, /malformed answer/);
      }),
    );
  }

  await t.test('the daemon keeps serving: a well-formed answer is served from 127.0.0.1', async (t) => {
    const before = up.requests.length;
    const r = await send('one', 'fine.raw.test');
    t.equal(r.status, 200, r.text.slice(0, 800));
    const ok = r.json as { status: number; target: { address: string } };
    t.equal(ok.status, 200);
    t.equal(ok.target.address, '127.0.0.1');
    t.equal(up.requests.length, before + 1, 'the upstream saw the request');
  });

  t.ok(
    cardAddresses.every((x) => x === '127.0.0.1'),
    'no card ever showed another address',
  );
  await d.stop();
  t.same(findCanary(texts.join('\n'), secret), [], 'no reply carries the secret');
  t.same(findCanary(d.logs(), secret), [], 'the daemon log holds no form of the secret');
  t.same(findCanary(journalBytes(h.home), secret), [], 'the journal files hold no form of the secret');
  t.same(findCanary(await journalText(h), secret), [], 'no decrypted journal entry holds a form of the secret');
});
