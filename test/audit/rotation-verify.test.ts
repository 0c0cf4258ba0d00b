// The verifier and signing key changes: hand-built journals in which a
// `signer` entry hands checkpoints over to another key, vouched for (or not)
// by a checkpoint of the key it replaces; each with the exact verdict, the
// entry it names and the signing keys reported. The main cases also go
// through the real CLI (`postern audit verify`, exit status and output).
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  EntryBody,
  GENESIS_PREV,
  checkpointMessage,
  encodeEntry,
  encryptEvent,
  entryHash,
  segmentPath,
  sodiumReady,
} from '../../shared/audit-format';
import { VerifyOptions, VerifyReport, verifyJournal } from '../../shared/audit-verify';
import { KeyPair, ed25519Keypair, ed25519Sign, randomBytes, sealTo, x25519Keypair } from '../../shared/crypto';
import { b64, writeFiles } from '../helpers/journal-fixture';
import { cleanEnv, cli } from '../helpers/postern';

const root = mkdtempSync(join(tmpdir(), 'pt-rotation-verify-'));
t.teardown(() => rmSync(root, { recursive: true, force: true }));
let counter = 0;

// One step of a hand-built journal; the genesis entry (seq 1) comes first
// on its own, so step i of the list is entry i + 2.
type Step =
  | { t: 'event' }
  | { t: 'key' }
  // signed by `by`, naming `claim` (default: `by`) as its key
  | { t: 'checkpoint'; by: KeyPair; claim?: KeyPair }
  | { t: 'signer'; to: KeyPair }
  // a signer line whose sign_pub is this exact text (not a valid key)
  | { t: 'badSigner'; signPub: string }
  // the next segment file begins here with its segment entry
  | { t: 'segment' };

const START = Date.UTC(2025, 3, 1);
const boxKeys: { pub: Buffer } = { pub: Buffer.alloc(0) };

// Writes the journal (genesis key `k0`) to a fresh directory; every line
// chains correctly from the one before, whatever it holds.
function build(k0: KeyPair, steps: Step[]): { path: string } {
  const journalId = randomBytes(16).toString('hex');
  const files: Buffer[][] = [[]];
  let prev = GENESIS_PREV;
  let seq = 0;
  let eventKey = randomBytes(32);
  let keyId = 0;
  const push = (body: EntryBody | ((seq: number, prev: string) => EntryBody)): void => {
    seq += 1;
    if (typeof body === 'function') body = body(seq, prev);
    const line = encodeEntry(seq, prev, new Date(START + seq * 1000).toISOString(), body);
    if (body.type === 'segment') files.push([]);
    (files[files.length - 1] as Buffer[]).push(line);
    prev = entryHash(line);
  };
  push({ type: 'genesis', journal_id: journalId, sign_pub: b64(k0.publicKey), box_pub: b64(boxKeys.pub) });
  for (const s of steps) {
    switch (s.t) {
      case 'key':
        eventKey = randomBytes(32);
        push((n) => {
          keyId = n;
          return { type: 'key', key_id: n, sealed: b64(sealTo(eventKey, boxKeys.pub)) };
        });
        break;
      case 'event':
        push((n, p) => ({
          type: 'event',
          key_id: keyId,
          ...encryptEvent(eventKey, n, p, { kind: 'http_request', n }),
        }));
        break;
      case 'checkpoint':
        push((n, p) => ({
          type: 'checkpoint',
          head_seq: n - 1,
          head: p,
          sign_pub: b64((s.claim ?? s.by).publicKey),
          sig: b64(ed25519Sign(checkpointMessage(journalId, n - 1, p), s.by.privateKey)),
        }));
        break;
      case 'signer':
        push({ type: 'signer', sign_pub: b64(s.to.publicKey) });
        break;
      case 'badSigner':
        push({ type: 'signer', sign_pub: s.signPub });
        break;
      case 'segment':
        push({ type: 'segment', segment: files.length });
        break;
    }
  }
  const path = writeFiles(join(root, `j${++counter}`), files);
  return { path };
}

const ev: Step = { t: 'event' };
const key: Step = { t: 'key' };
const cp = (by: KeyPair, claim?: KeyPair): Step => (claim ? { t: 'checkpoint', by, claim } : { t: 'checkpoint', by });
const signer = (to: KeyPair): Step => ({ t: 'signer', to });

interface Expect {
  ok: boolean;
  kind?: string;
  seq?: number | null;
  keys: Array<[KeyPair, number]>;
  message?: RegExp;
  // where the problem is reported: segment file number and line
  at?: { segment: number; line: number };
}

interface Case {
  name: string;
  steps: Step[];
  runs: Array<{ opts: (k: Keys) => VerifyOptions; expect: Expect; label: string }>;
}

interface Keys {
  k0: KeyPair;
  k1: KeyPair;
  k2: KeyPair;
  x: KeyPair; // never in any journal
}

t.test('verifyJournal across signing key changes', async (t) => {
  await sodiumReady();
  boxKeys.pub = x25519Keypair().publicKey;
  const K: Keys = { k0: ed25519Keypair(), k1: ed25519Keypair(), k2: ed25519Keypair(), x: ed25519Keypair() };
  const { k0, k1, k2, x } = K;
  const pin = (p: KeyPair) => (): VerifyOptions => ({ pubkey: b64(p.publicKey) });
  const none = (): VerifyOptions => ({});
  const allow = (): VerifyOptions => ({ allowUnsignedTail: true });

  // K0 -> K1: signer at 7, vouched by K0's checkpoint at 8, K1 signs 11 and 13.
  const oneChange = [key, ev, ev, cp(k0), ev, signer(k1), cp(k0), ev, ev, cp(k1), ev, cp(k1)];
  // K0 -> K1 -> K2: signers at 5 and 10.
  const twoChanges = [key, ev, cp(k0), signer(k1), cp(k0), ev, cp(k1), ev, signer(k2), cp(k1), ev, cp(k2)];
  // K1 signs only the checkpoint that vouches for K2 (signers at 4 and 7).
  const twoChangesTight = [key, ev, signer(k1), cp(k0), ev, signer(k2), cp(k1), ev, cp(k2)];
  const ok1: Expect = {
    ok: true,
    keys: [
      [k0, 1],
      [k1, 7],
    ],
  };
  const ok2: Expect = {
    ok: true,
    keys: [
      [k0, 1],
      [k1, 5],
      [k2, 10],
    ],
  };
  const ok2t: Expect = {
    ok: true,
    keys: [
      [k0, 1],
      [k1, 4],
      [k2, 7],
    ],
  };
  const neverChanges = /never changes to the pinned key/;

  const cases: Case[] = [
    {
      name: 'K0 -> K1, vouched',
      steps: oneChange,
      runs: [
        { label: 'unpinned', opts: none, expect: ok1 },
        { label: 'pinned K0 (genesis)', opts: pin(k0), expect: ok1 },
        { label: 'pinned K1 (vouched, then signs)', opts: pin(k1), expect: ok1 },
        {
          label: 'pinned an unrelated key',
          opts: pin(x),
          expect: {
            ok: false,
            kind: 'wrong_key',
            seq: 1,
            keys: [
              [k0, 1],
              [k1, 7],
            ],
            message: neverChanges,
            at: { segment: 0, line: 1 },
          },
        },
      ],
    },
    {
      name: 'K0 -> K1 -> K2, vouched',
      steps: twoChanges,
      runs: [
        { label: 'unpinned', opts: none, expect: ok2 },
        { label: 'pinned K0', opts: pin(k0), expect: ok2 },
        { label: 'pinned K1', opts: pin(k1), expect: ok2 },
        { label: 'pinned K2', opts: pin(k2), expect: ok2 },
        {
          label: 'pinned an unrelated key',
          opts: pin(x),
          expect: {
            ok: false,
            kind: 'wrong_key',
            seq: 1,
            keys: [
              [k0, 1],
              [k1, 5],
              [k2, 10],
            ],
            message: neverChanges,
          },
        },
      ],
    },
    {
      name: 'K0 -> K1 -> K2, K1 signs only the checkpoint that hands over to K2',
      steps: twoChangesTight,
      runs: [
        { label: 'unpinned', opts: none, expect: ok2t },
        { label: 'pinned K1', opts: pin(k1), expect: ok2t },
        { label: 'pinned K2', opts: pin(k2), expect: ok2t },
      ],
    },
    {
      name: 'K0 -> K1 vouched, but no checkpoint by K1 follows',
      steps: [key, ev, cp(k0), signer(k1), cp(k0)],
      runs: [
        {
          label: 'unpinned',
          opts: none,
          expect: {
            ok: true,
            keys: [
              [k0, 1],
              [k1, 5],
            ],
          },
        },
        {
          label: 'pinned K0',
          opts: pin(k0),
          expect: {
            ok: true,
            keys: [
              [k0, 1],
              [k1, 5],
            ],
          },
        },
        {
          label: 'pinned K1',
          opts: pin(k1),
          expect: {
            ok: false,
            kind: 'wrong_key',
            seq: 1,
            keys: [
              [k0, 1],
              [k1, 5],
            ],
            message: /changes to the pinned key .* at entry 5, but no checkpoint signed by it follows/,
            at: { segment: 0, line: 1 },
          },
        },
      ],
    },
    {
      name: 'K0 -> K1 -> K2 vouched, K2 never signs',
      steps: [key, ev, cp(k0), signer(k1), cp(k0), ev, cp(k1), signer(k2), cp(k1)],
      runs: [
        {
          label: 'pinned K1',
          opts: pin(k1),
          expect: {
            ok: true,
            keys: [
              [k0, 1],
              [k1, 5],
              [k2, 9],
            ],
          },
        },
        {
          label: 'pinned K2',
          opts: pin(k2),
          expect: {
            ok: false,
            kind: 'wrong_key',
            seq: 1,
            keys: [
              [k0, 1],
              [k1, 5],
              [k2, 9],
            ],
            message: /at entry 9, but no checkpoint signed by it follows/,
          },
        },
      ],
    },
    {
      name: 'a change right after the genesis entry',
      steps: [signer(k1), cp(k0), key, ev, cp(k1)],
      runs: [
        {
          label: 'pinned K0',
          opts: pin(k0),
          expect: {
            ok: true,
            keys: [
              [k0, 1],
              [k1, 2],
            ],
          },
        },
        {
          label: 'pinned K1',
          opts: pin(k1),
          expect: {
            ok: true,
            keys: [
              [k0, 1],
              [k1, 2],
            ],
          },
        },
      ],
    },
    {
      name: 'K0 -> K1 vouched, then unsigned entries only',
      steps: [key, ev, cp(k0), signer(k1), cp(k0), ev, ev],
      runs: [
        {
          label: 'pinned K1, unsigned tail allowed',
          opts: () => ({ pubkey: b64(k1.publicKey), allowUnsignedTail: true }),
          expect: {
            ok: false,
            kind: 'wrong_key',
            seq: 1,
            keys: [
              [k0, 1],
              [k1, 5],
            ],
          },
        },
        {
          label: 'pinned K0, unsigned tail allowed',
          opts: () => ({ pubkey: b64(k0.publicKey), allowUnsignedTail: true }),
          expect: {
            ok: true,
            keys: [
              [k0, 1],
              [k1, 5],
            ],
          },
        },
      ],
    },
    {
      name: 'a checkpoint by the retired key after the change',
      steps: [key, ev, ev, cp(k0), ev, signer(k1), cp(k0), ev, ev, cp(k0), ev, cp(k1)],
      runs: [
        {
          label: 'unpinned',
          opts: none,
          expect: {
            ok: false,
            kind: 'wrong_key',
            seq: 11,
            keys: [
              [k0, 1],
              [k1, 7],
            ],
            message: /retired/,
            at: { segment: 0, line: 11 },
          },
        },
        {
          label: 'pinned K0',
          opts: pin(k0),
          expect: {
            ok: false,
            kind: 'wrong_key',
            seq: 11,
            keys: [
              [k0, 1],
              [k1, 7],
            ],
            message: /retired/,
          },
        },
      ],
    },
    {
      name: 'a checkpoint by an unrelated key after the change',
      steps: [key, ev, cp(k0), signer(k1), cp(k0), ev, cp(x), ev, cp(k1)],
      runs: [
        {
          label: 'unpinned',
          opts: none,
          expect: {
            ok: false,
            kind: 'wrong_key',
            seq: 8,
            keys: [
              [k0, 1],
              [k1, 5],
            ],
          },
        },
      ],
    },
    {
      name: 'the new key vouches for itself',
      steps: [key, ev, cp(k0), signer(k1), cp(k1), ev, cp(k1)],
      runs: [
        {
          label: 'unpinned',
          opts: none,
          expect: { ok: false, kind: 'unsigned_rotation', seq: 5, keys: [[k0, 1]], at: { segment: 0, line: 5 } },
        },
        {
          label: 'pinned K1',
          opts: pin(k1),
          expect: { ok: false, kind: 'unsigned_rotation', seq: 5, keys: [[k0, 1]] },
        },
      ],
    },
    {
      name: 'an unrelated key vouches for the change',
      steps: [key, ev, cp(k0), signer(k1), cp(x), ev, cp(k1)],
      runs: [
        { label: 'unpinned', opts: none, expect: { ok: false, kind: 'unsigned_rotation', seq: 5, keys: [[k0, 1]] } },
      ],
    },
    {
      name: 'the second change vouched for by K0 instead of K1',
      steps: [key, ev, cp(k0), signer(k1), cp(k0), ev, cp(k1), signer(k2), cp(k0), ev, cp(k2)],
      runs: [
        {
          label: 'unpinned',
          opts: none,
          expect: {
            ok: false,
            kind: 'unsigned_rotation',
            seq: 9,
            keys: [
              [k0, 1],
              [k1, 5],
            ],
          },
        },
      ],
    },
    {
      name: 'unvouched: an event right after the signer entry',
      steps: [key, ev, cp(k0), signer(k1), ev, cp(k1)],
      runs: [
        {
          label: 'unpinned',
          opts: none,
          expect: { ok: false, kind: 'unsigned_rotation', seq: 5, keys: [[k0, 1]], at: { segment: 0, line: 5 } },
        },
        {
          label: 'pinned K1',
          opts: pin(k1),
          expect: { ok: false, kind: 'unsigned_rotation', seq: 5, keys: [[k0, 1]] },
        },
      ],
    },
    {
      name: 'unvouched: an event after the signer entry ends the journal',
      steps: [key, ev, cp(k0), signer(k1), ev],
      runs: [
        { label: 'unpinned', opts: none, expect: { ok: false, kind: 'unsigned_rotation', seq: 5, keys: [[k0, 1]] } },
        {
          label: 'unsigned tail allowed',
          opts: allow,
          expect: { ok: false, kind: 'unsigned_rotation', seq: 5, keys: [[k0, 1]] },
        },
      ],
    },
    {
      name: 'unvouched: an event, then a checkpoint by the old key',
      steps: [key, ev, cp(k0), signer(k1), ev, cp(k0)],
      runs: [
        { label: 'unpinned', opts: none, expect: { ok: false, kind: 'unsigned_rotation', seq: 5, keys: [[k0, 1]] } },
      ],
    },
    {
      name: 'unvouched: a key entry right after the signer entry',
      steps: [key, ev, cp(k0), signer(k1), key, cp(k0)],
      runs: [
        { label: 'unpinned', opts: none, expect: { ok: false, kind: 'unsigned_rotation', seq: 5, keys: [[k0, 1]] } },
      ],
    },
    {
      name: 'two signer entries in a row',
      steps: [key, ev, cp(k0), signer(k1), signer(k2), cp(k0), ev, cp(k2)],
      runs: [
        { label: 'unpinned', opts: none, expect: { ok: false, kind: 'unsigned_rotation', seq: 5, keys: [[k0, 1]] } },
      ],
    },
    {
      name: 'the vouching checkpoint names K0 but K1 signed it',
      steps: [key, ev, cp(k0), signer(k1), cp(k1, k0), ev, cp(k1)],
      runs: [
        {
          label: 'unpinned',
          opts: none,
          expect: { ok: false, kind: 'bad_signature', seq: 6, keys: [[k0, 1]], at: { segment: 0, line: 6 } },
        },
        { label: 'pinned K1', opts: pin(k1), expect: { ok: false, kind: 'bad_signature', seq: 6, keys: [[k0, 1]] } },
      ],
    },
    {
      name: 'the vouching checkpoint names K0 but an unrelated key signed it',
      steps: [key, ev, cp(k0), signer(k1), cp(x, k0), ev, cp(k1)],
      runs: [{ label: 'unpinned', opts: none, expect: { ok: false, kind: 'bad_signature', seq: 6, keys: [[k0, 1]] } }],
    },
    {
      name: 'the signer entry is the last entry',
      steps: [key, ev, cp(k0), signer(k1)],
      runs: [
        { label: 'unpinned', opts: none, expect: { ok: false, kind: 'unsigned_tail', seq: 5, keys: [[k0, 1]] } },
        { label: 'unsigned tail allowed', opts: allow, expect: { ok: true, keys: [[k0, 1]] } },
        {
          label: 'pinned K0, unsigned tail allowed',
          opts: () => ({ pubkey: b64(k0.publicKey), allowUnsignedTail: true }),
          expect: { ok: true, keys: [[k0, 1]] },
        },
        {
          label: 'pinned K1, unsigned tail allowed',
          opts: () => ({ pubkey: b64(k1.publicKey), allowUnsignedTail: true }),
          expect: { ok: false, kind: 'wrong_key', seq: 1, keys: [[k0, 1]], message: neverChanges },
        },
      ],
    },
    {
      name: 'signer and its checkpoint at the end of segment 0, K1 signs in segment 1',
      steps: [key, ev, cp(k0), signer(k1), cp(k0), { t: 'segment' }, key, ev, cp(k1)],
      runs: [
        {
          label: 'unpinned',
          opts: none,
          expect: {
            ok: true,
            keys: [
              [k0, 1],
              [k1, 5],
            ],
          },
        },
        {
          label: 'pinned K1',
          opts: pin(k1),
          expect: {
            ok: true,
            keys: [
              [k0, 1],
              [k1, 5],
            ],
          },
        },
      ],
    },
    {
      name: 'the signer ends segment 0; its checkpoint is in segment 1 after the segment entry',
      steps: [key, ev, cp(k0), signer(k1), { t: 'segment' }, cp(k0), key, ev, cp(k1)],
      runs: [
        {
          label: 'unpinned',
          opts: none,
          expect: { ok: false, kind: 'unsigned_rotation', seq: 5, keys: [[k0, 1]], at: { segment: 0, line: 5 } },
        },
        {
          label: 'pinned K1',
          opts: pin(k1),
          expect: { ok: false, kind: 'unsigned_rotation', seq: 5, keys: [[k0, 1]] },
        },
      ],
    },
  ];

  // A signer line whose key does not decode: 31 bytes, 33 bytes, or
  // non-canonical base64 (the unused low bits of the last character set).
  const canonical = b64(k1.publicKey);
  const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  const lastChar = canonical[42] as string;
  const nonCanonical = canonical.slice(0, 42) + (ALPHABET[ALPHABET.indexOf(lastChar) + 1] as string) + '=';
  t.equal(Buffer.from(nonCanonical, 'base64').length, 32, 'the non-canonical spelling still decodes to 32 bytes');
  t.not(Buffer.from(nonCanonical, 'base64').toString('base64'), nonCanonical, 'and is not canonical');
  for (const [what, text] of [
    ['31 bytes', b64(k1.publicKey.subarray(0, 31))],
    ['33 bytes', b64(Buffer.concat([k1.publicKey, Buffer.from([7])]))],
    ['non-canonical base64', nonCanonical],
  ] as const) {
    cases.push({
      name: `a signer line with a bad key (${what})`,
      steps: [key, ev, cp(k0), { t: 'badSigner', signPub: text }, cp(k0), ev, cp(k1)],
      runs: [
        {
          label: 'unpinned',
          opts: none,
          expect: {
            ok: false,
            kind: 'modified',
            seq: 5,
            keys: [[k0, 1]],
            message: /no longer decodes: bad public key/,
            at: { segment: 0, line: 5 },
          },
        },
      ],
    });
  }

  for (const c of cases) {
    const j = build(k0, c.steps);
    t.test(c.name, async (t) => {
      for (const run of c.runs) {
        const r: VerifyReport = await verifyJournal(j.path, run.opts(K));
        const e = run.expect;
        const what = `${run.label}: ${r.problem ? `${r.problem.kind} at ${r.problem.seq}: ${r.problem.message}` : 'ok'}`;
        t.same({ ok: r.ok, kind: r.problem?.kind, seq: r.problem?.seq }, { ok: e.ok, kind: e.kind, seq: e.seq }, what);
        t.same(
          r.signingKeys,
          e.keys.map(([k, since]) => ({ key: b64(k.publicKey), since })),
          `${run.label}: signing keys`,
        );
        if (e.message) t.match(r.problem?.message ?? '', e.message, `${run.label}: message`);
        if (e.at)
          t.same(
            { file: r.problem?.file, line: r.problem?.line },
            { file: segmentPath(j.path, e.at.segment), line: e.at.line },
            `${run.label}: where`,
          );
        if (e.ok) t.equal(r.problem, null, `${run.label}: no problem`);
      }
    });
  }

  t.test('the real CLI', async (t) => {
    const env = { env: cleanEnv() };
    const k = (p: KeyPair): string => b64(p.publicKey);
    const happy = build(k0, twoChanges);
    const keysLine = `signing keys: ${k(k0)} (from entry 1), ${k(k1)} (from entry 5), ${k(k2)} (from entry 10)`;

    for (const p of [k0, k1, k2]) {
      const r = cli(env, ['audit', 'verify', '--log', happy.path, '--pubkey', k(p), '--json']);
      t.equal(
        r.code,
        0,
        `K0 -> K1 -> K2 pinned to ${p === k0 ? 'K0' : p === k1 ? 'K1' : 'K2'}: exit 0 (${r.stderr.trim()})`,
      );
      const out = JSON.parse(r.stdout) as VerifyReport;
      t.equal(out.ok, true);
      t.equal(out.problem, null);
      t.same(out.signingKeys, [
        { key: k(k0), since: 1 },
        { key: k(k1), since: 5 },
        { key: k(k2), since: 10 },
      ]);
      t.equal(r.stderr, '');
    }
    const human = cli(env, ['audit', 'verify', '--log', happy.path, '--pubkey', k(k2)]);
    t.equal(human.code, 0);
    t.ok(human.stdout.split('\n').includes(keysLine), 'the human report lists the keys', { stdout: human.stdout });
    t.match(human.stdout, /\nresult: ok\n$/);

    const one = build(k0, oneChange);
    const humanOne = cli(env, ['audit', 'verify', '--log', one.path]);
    t.equal(humanOne.code, 0);
    t.ok(
      humanOne.stdout.split('\n').includes(`signing keys: ${k(k0)} (from entry 1), ${k(k1)} (from entry 7)`),
      'unpinned: the human report lists the keys',
      { stdout: humanOne.stdout },
    );

    const failures: Array<{ name: string; path: string; pubkey: KeyPair; kind: string; seq: number }> = [
      {
        name: 'unvouched signer',
        path: build(k0, [key, ev, cp(k0), signer(k1), ev, cp(k1)]).path,
        pubkey: k1,
        kind: 'unsigned_rotation',
        seq: 5,
      },
      {
        name: 'retired key',
        path: build(k0, [key, ev, ev, cp(k0), ev, signer(k1), cp(k0), ev, ev, cp(k0), ev, cp(k1)]).path,
        pubkey: k0,
        kind: 'wrong_key',
        seq: 11,
      },
      {
        name: 'self-vouched',
        path: build(k0, [key, ev, cp(k0), signer(k1), cp(k1), ev, cp(k1)]).path,
        pubkey: k1,
        kind: 'unsigned_rotation',
        seq: 5,
      },
      { name: 'pinned an unrelated key', path: happy.path, pubkey: x, kind: 'wrong_key', seq: 1 },
    ];
    for (const f of failures) {
      const r = cli(env, ['audit', 'verify', '--log', f.path, '--pubkey', k(f.pubkey), '--json']);
      t.equal(r.code, 1, `${f.name}: exit 1`);
      const out = JSON.parse(r.stdout) as VerifyReport;
      t.same(
        { ok: out.ok, kind: out.problem?.kind, seq: out.problem?.seq },
        { ok: false, kind: f.kind, seq: f.seq },
        f.name,
      );
      t.equal(r.stderr, `postern: audit verification failed: ${f.kind} at entry ${f.seq}\n`, `${f.name}: stderr`);
    }
    const retiredHuman = cli(env, ['audit', 'verify', '--log', failures[1]!.path]);
    t.equal(retiredHuman.code, 1);
    t.ok(
      retiredHuman.stdout.split('\n').includes(`signing keys: ${k(k0)} (from entry 1), ${k(k1)} (from entry 7)`),
      'a failed report lists the keys too',
      { stdout: retiredHuman.stdout },
    );
    t.match(retiredHuman.stdout, /\nproblem: entry 11: wrong_key \([^\n]*\): [^\n]*retired[^\n]*\nresult: FAILED\n$/);
  });
});
