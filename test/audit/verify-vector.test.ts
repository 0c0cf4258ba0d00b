// The test vector of docs/audit-format.md: it is what the fixture's
// generator makes, postern's verifier accepts it, and so does a small
// verifier written here from the document alone (raw libsodium calls, none
// of postern's code), which also decrypts the events.
import t from 'tap';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import sodium = require('libsodium-wrappers-sumo');
import { verifyJournal } from '../../shared/audit-verify';
import { makeTestVector } from '../helpers/journal-fixture';
import { ROOT } from '../helpers/repo-root';

const DOC = readFileSync(resolve(ROOT, 'docs', 'audit-format.md'), 'utf8');

function block(name: string): string[] {
  const m = new RegExp('```vector-' + name + '\\n([\\s\\S]*?)```').exec(DOC);
  if (!m) throw new Error(`docs/audit-format.md has no vector-${name} block`);
  return (m[1] as string).split('\n').filter((l) => l.length > 0);
}

function table(name: string): Record<string, string> {
  return Object.fromEntries(
    block(name).map((l) => {
      const [k, ...rest] = l.split(/\s+/);
      return [k as string, rest.join(' ')];
    }),
  );
}

const keys = table('keys');
const journalLines = block('journal');
const hashes = table('hashes');
const payloads = table('payloads');

// ---------------------------------------------------------------------------
// The independent verifier, from the document: key order per type, canonical
// JSON, BLAKE2b-256 chain, checkpoint message and Ed25519 signature.

const TYPE_KEYS: Record<string, string[]> = {
  genesis: ['journal_id', 'sign_pub', 'box_pub'],
  segment: ['segment'],
  key: ['key_id', 'sealed'],
  event: ['key_id', 'nonce', 'ct'],
  vault: ['generation', 'vault_hash'],
  checkpoint: ['head_seq', 'head', 'sign_pub', 'sig'],
  repair: ['cut_bytes', 'at_offset'],
};
const ZEROS = '0'.repeat(64);
const hex = (u: Uint8Array): string => Buffer.from(u).toString('hex');
const unb64 = (s: string): Buffer => {
  const b = Buffer.from(s, 'base64');
  if (b.toString('base64') !== s) throw new Error(`not canonical base64: ${s}`);
  return b;
};

function miniVerify(text: string, pinned: string): { ok: true; hashes: string[] } | { ok: false; why: string } {
  if (!text.endsWith('\n')) return { ok: false, why: 'torn last line' };
  const lines = text.slice(0, -1).split('\n');
  const out: string[] = [];
  let journalId = '';
  let lastCheckpoint = 0;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] as string;
    const seq = i + 1;
    if (!/^[\x20-\x7e]+$/.test(line)) return { ok: false, why: `line ${seq}: not printable ASCII` };
    let o: Record<string, unknown>;
    try {
      o = JSON.parse(line) as Record<string, unknown>;
    } catch {
      return { ok: false, why: `line ${seq}: not JSON` };
    }
    const type = String(o['type']);
    const want = ['v', 'seq', 'prev', 'time', 'type', ...(TYPE_KEYS[type] ?? ['?'])];
    if (Object.keys(o).join(',') !== want.join(',')) return { ok: false, why: `line ${seq}: keys` };
    if (JSON.stringify(o) !== line) return { ok: false, why: `line ${seq}: not canonical` };
    if (o['v'] !== 1 || o['seq'] !== seq) return { ok: false, why: `line ${seq}: v or seq` };
    if (o['prev'] !== (seq === 1 ? ZEROS : out[i - 1])) return { ok: false, why: `line ${seq}: prev` };
    const time = String(o['time']);
    if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/.test(time) || new Date(time).toISOString() !== time)
      return { ok: false, why: `line ${seq}: time` };
    if ((seq === 1) !== (type === 'genesis')) return { ok: false, why: `line ${seq}: genesis only first` };
    try {
      if (type === 'genesis') {
        journalId = String(o['journal_id']);
        if (!/^[0-9a-f]{32}$/.test(journalId) || o['sign_pub'] !== pinned || unb64(String(o['box_pub'])).length !== 32)
          return { ok: false, why: 'genesis' };
      }
      if (type === 'checkpoint') {
        if (o['head_seq'] !== seq - 1 || o['head'] !== o['prev'] || o['sign_pub'] !== pinned)
          return { ok: false, why: `line ${seq}: checkpoint head or key` };
        const msg = Buffer.from(`postern-audit-checkpoint-v1\n${journalId}\n${seq - 1}\n${String(o['head'])}`, 'ascii');
        if (!sodium.crypto_sign_verify_detached(unb64(String(o['sig'])), msg, unb64(pinned)))
          return { ok: false, why: `line ${seq}: signature` };
        lastCheckpoint = seq;
      }
    } catch (e) {
      return { ok: false, why: `line ${seq}: ${(e as Error).message}` };
    }
    out.push(hex(sodium.crypto_generichash(32, Buffer.from(line, 'ascii'), null)));
  }
  if (lastCheckpoint !== lines.length) return { ok: false, why: 'unsigned tail' };
  return { ok: true, hashes: out };
}

t.before(async () => {
  await sodium.ready;
});

t.test('the document holds the vector the fixture generates', async (t) => {
  const v = await makeTestVector();
  t.same(journalLines, v.lines);
  t.same(Object.values(hashes), v.hashes);
  t.same(Object.keys(hashes), ['1', '2', '3', '4', '5', '6']);
  t.equal(keys['sign_seed'], v.signSeedHex);
  t.equal(keys['sign_public'], v.signPublic);
  t.equal(keys['box_secret'], v.boxSecretHex);
  t.equal(keys['box_public'], v.boxPublic);
  t.equal(keys['ephemeral_seed'], v.ephemeralSeedHex);
  t.equal(keys['event_key'], v.eventKeyHex);
  t.equal(keys['journal_id'], v.journalId);
  t.same(Object.fromEntries(Object.entries(payloads).map(([k, p]) => [k, JSON.parse(p) as unknown])), v.payloads);
  t.match(DOC, `The head is \`6:${v.hashes[5]}\``);
});

t.test('the independent verifier accepts the vector and decrypts it', async (t) => {
  const text = journalLines.join('\n') + '\n';
  const r = miniVerify(text, keys['sign_public'] as string);
  t.same(r, { ok: true, hashes: Object.values(hashes) });

  // The keys are what the document says they are.
  const sign = sodium.crypto_sign_seed_keypair(Buffer.from(keys['sign_seed'] as string, 'hex'));
  t.equal(Buffer.from(sign.publicKey).toString('base64'), keys['sign_public']);
  const boxSecret = Buffer.from(keys['box_secret'] as string, 'hex');
  const boxPublic = sodium.crypto_scalarmult_base(boxSecret);
  t.equal(Buffer.from(boxPublic).toString('base64'), keys['box_public']);

  // The key entry opens to the event key; the events decrypt with their seq:prev.
  const entries = journalLines.map((l) => JSON.parse(l) as Record<string, string | number>);
  const keyEntry = entries[1] as Record<string, string | number>;
  const eventKey = sodium.crypto_box_seal_open(unb64(String(keyEntry['sealed'])), boxPublic, boxSecret);
  t.equal(hex(eventKey), keys['event_key']);
  const seen: Record<string, string> = {};
  for (const e of entries.filter((x) => x['type'] === 'event')) {
    t.equal(e['key_id'], keyEntry['seq'], 'events name the key entry by its seq');
    const pt = sodium.crypto_aead_xchacha20poly1305_ietf_decrypt(
      null,
      unb64(String(e['ct'])),
      Buffer.from(`${e['seq']}:${e['prev']}`, 'ascii'),
      unb64(String(e['nonce'])),
      eventKey,
    );
    seen[String(e['seq'])] = Buffer.from(pt).toString('utf8');
    t.throws(
      () =>
        sodium.crypto_aead_xchacha20poly1305_ietf_decrypt(
          null,
          unb64(String(e['ct'])),
          Buffer.from(`${Number(e['seq']) + 1}:${e['prev']}`, 'ascii'),
          unb64(String(e['nonce'])),
          eventKey,
        ),
      'another place in the chain does not decrypt',
    );
  }
  t.same(seen, payloads);
});

t.test('the independent verifier refuses damaged vectors', async (t) => {
  const pinned = keys['sign_public'] as string;
  const lines = journalLines;
  const damaged: Array<[string, string[]]> = [
    ['a changed time', lines.map((l, i) => (i === 2 ? l.replace('03:04:03', '03:04:09') : l))],
    ['two lines swapped', [lines[0], lines[2], lines[1], ...lines.slice(3)] as string[]],
    ['a line removed', [...lines.slice(0, 3), ...lines.slice(4)]],
    ['no checkpoint at the end', lines.slice(0, 5)],
    ['a space added', lines.map((l, i) => (i === 3 ? l.replace('"generation":1', '"generation": 1') : l))],
  ];
  for (const [what, ls] of damaged) t.equal(miniVerify(ls.join('\n') + '\n', pinned).ok, false, what);
  t.equal(miniVerify(lines.join('\n') + '\n', Buffer.alloc(32, 1).toString('base64')).ok, false, 'another pinned key');
});

t.test("postern's verifier accepts the vector, pinned, with its head", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'pt-audit-vector-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'audit.log');
  writeFileSync(path, journalLines.join('\n') + '\n');
  const r = await verifyJournal(path, {
    pubkey: keys['sign_public'],
    expectHead: { seq: 6, hash: hashes['6'] as string },
  });
  t.same(r, {
    ok: true,
    entries: 6,
    checkpoints: 1,
    segments: 1,
    head: { seq: 6, hash: hashes['6'] },
    keyPinned: true,
    signingKeys: [{ key: keys['sign_public'], since: 1 }],
    signedThrough: 5,
    unsignedTail: 0,
    problem: null,
  });
  writeFileSync(path, journalLines.slice(0, 5).join('\n') + '\n');
  t.match(await verifyJournal(path, { pubkey: keys['sign_public'] }), {
    ok: false,
    problem: { kind: 'unsigned_tail', seq: 1 },
  });
});
