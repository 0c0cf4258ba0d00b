// docs/vault-format.md and docs/audit-format.md are enough to read a real
// vault and the events of its journal: a vault and journal made by the real
// CLI and daemon (init, unlock, cred add) are opened here with raw
// libsodium calls and the documents' offsets, fields and recipes only, not
// postern's readers. The document's table of meta fields is the schema's
// list of fields, and the secret is nowhere in the journal.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { X509Certificate, createHash, createPrivateKey } from 'node:crypto';
import { join } from 'node:path';
import libsodium = require('libsodium-wrappers-sumo');
import { vaultMetaSchema } from '../../shared/vault-meta';
import { PASSPHRASE, ROOT, cli, init, makeHome, startDaemon } from '../helpers/postern';

const DEF = `name = "github"
kind = "http"

[inject]
header = "Authorization"
template = "Bearer {secret}"

[[allow]]
host = "api.github.com"
methods = ["GET"]
paths = ["/repos/*"]
`;
const CANARY = 'ghp_canary_7b1f0c3e9a5d4b2f8e6a';

// The field column of the table under "## Meta document".
function documentedFields(): string[] {
  const doc = readFileSync(join(ROOT, 'docs', 'vault-format.md'), 'utf8');
  const start = doc.indexOf('\n## Meta document\n');
  if (start < 0) return [];
  const fields: string[] = [];
  for (const line of doc.slice(start).split('\n').slice(2)) {
    if (line.startsWith('#')) break;
    const m = /^\| `([a-z_.[\]]+)` \|/.exec(line);
    if (m) fields.push(m[1] as string);
  }
  return fields;
}

// Every field path of the zod schema, objects walked, lists of objects as `[]`.
function schemaFields(shape: Record<string, unknown>, prefix = ''): string[] {
  const out: string[] = [];
  for (const [key, value] of Object.entries(shape)) {
    const path = `${prefix}${key}`;
    out.push(path);
    let v = value as {
      unwrap?: () => unknown;
      shape?: Record<string, unknown>;
      element?: { shape?: Record<string, unknown> };
    };
    if (typeof v.unwrap === 'function' && !v.shape && !v.element) v = v.unwrap() as typeof v;
    if (v.shape) out.push(...schemaFields(v.shape, `${path}.`));
    else if (v.element?.shape) out.push(...schemaFields(v.element.shape, `${path}[].`));
  }
  return out;
}

// JSON with object keys sorted at every level, no whitespace.
function sortedJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(sortedJson).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${sortedJson(o[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v);
}

t.test("the meta fields the document lists are the schema's", async (t) => {
  const documented = documentedFields();
  t.ok(documented.length > 0, 'the document has a table of meta fields');
  t.same([...documented].sort(), schemaFields(vaultMetaSchema.shape as unknown as Record<string, unknown>).sort());
});

t.test('a real vault and its journal, read from the documents alone', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0, 'init');
  const d = await startDaemon(h);
  t.equal(cli(h, ['unlock', '--passphrase-file', h.passFile]).code, 0, 'unlock');
  const added = cli(h, [
    'cred',
    'add',
    '--file',
    h.file('gh.toml', DEF),
    '--secret-file',
    h.file('gh.secret', `${CANARY}\n`),
    '--passphrase-file',
    h.passFile,
  ]);
  t.equal(added.code, 0, added.stderr);
  await d.stop();

  await libsodium.ready;
  const s = libsodium;
  const file = readFileSync(join(h.home, 'vault'));
  // Header (docs/vault-format.md, "Header").
  t.equal(file.subarray(0, 8).toString('latin1'), 'POSTERNV');
  t.same([file[8], file[9]], [1, 2], 'version 1, Argon2id');
  const opslimit = file.readUInt32LE(10);
  const memlimit = file.readUInt32LE(14);
  const salt = file.subarray(18, 34);
  const nonce = file.subarray(34, 58);
  const generation = Number(file.readBigUInt64LE(58));
  const n = file.readUInt32LE(66);
  const header = file.subarray(0, 70 + n);
  t.type(JSON.parse(header.subarray(70).toString('utf8')), 'object', 'the approved config is JSON');
  // Key and body.
  const key = s.crypto_pwhash(
    32,
    Buffer.from(PASSPHRASE, 'utf8'),
    salt,
    opslimit,
    memlimit,
    s.crypto_pwhash_ALG_ARGON2ID13,
  );
  const plain = Buffer.from(
    s.crypto_aead_xchacha20poly1305_ietf_decrypt(null, file.subarray(70 + n), header, nonce, key),
  );
  // Container.
  t.equal(plain.subarray(0, 4).toString('latin1'), 'PVB1');
  const m = plain.readUInt32LE(4);
  const meta = JSON.parse(plain.subarray(8, 8 + m).toString('utf8')) as Record<string, any>;
  let o = 8 + m;
  const count = plain.readUInt32LE(o);
  o += 4;
  const blobs: Buffer[] = [];
  for (let i = 0; i < count; i++) {
    const l = plain.readUInt32LE(o);
    blobs.push(plain.subarray(o + 4, o + 4 + l));
    o += 4 + l;
  }
  t.equal(o, plain.length, 'nothing follows the last blob');

  // The meta document's fields, as the document describes them.
  const iso = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
  t.equal(meta['format'], 1);
  t.match(meta['created_at'], iso);
  const audit = meta['audit'];
  const blob = (i: unknown): Buffer => blobs[i as number] as Buffer;
  const signSecret = blob(audit.sign_secret);
  t.equal(signSecret.length, 64, 'sign_secret: 64 bytes');
  t.equal(signSecret.subarray(32).toString('base64'), audit.sign_public, 'seed then public key');
  t.equal(
    Buffer.from(s.crypto_sign_seed_keypair(signSecret.subarray(0, 32)).publicKey).toString('base64'),
    audit.sign_public,
    'the seed gives sign_public',
  );
  const boxSecret = blob(audit.box_secret);
  t.equal(boxSecret.length, 32, 'box_secret: 32 bytes');
  t.equal(
    Buffer.from(s.crypto_scalarmult_base(boxSecret)).toString('base64'),
    audit.box_public,
    'box_secret gives box_public',
  );
  t.equal(audit.sign_next, undefined, 'no key change under way');
  t.equal(meta['credentials'].length, 1);
  const c = meta['credentials'][0];
  t.match(c, { name: 'github', kind: 'http', created_at: iso, updated_at: iso });
  t.equal(c.definition.name, 'github', 'the normalised definition');
  t.equal(
    c.definition_hash,
    `sha256:${createHash('sha256').update(sortedJson(c.definition), 'utf8').digest('hex')}`,
    'definition_hash: SHA-256 of the canonical JSON',
  );
  t.equal(blob(c.secret).toString('utf8'), CANARY, 'the secret blob, its trailing newline removed');
  // The proxy front door's CA: its certificate is ca.pem, its blob the
  // PKCS#8 private key of the certificate's public key.
  const ca = meta['proxy_ca'];
  t.equal(ca.cert_pem, readFileSync(join(h.home, 'ca.pem'), 'utf8'), 'proxy_ca.cert_pem: the text of ca.pem');
  const caCert = new X509Certificate(ca.cert_pem);
  const caKey = createPrivateKey({ key: blob(ca.key), format: 'der', type: 'pkcs8' });
  t.equal(caKey.asymmetricKeyDetails?.namedCurve, 'prime256v1', 'proxy_ca.key: an ECDSA P-256 key');
  t.ok(caCert.checkPrivateKey(caKey), "proxy_ca.key: the certificate's private key");
  t.same(
    [audit.sign_secret, audit.box_secret, c.secret, ca.key],
    [0, 1, 2, 3],
    'blobs in the order the daemon writes them',
  );

  // The journal (docs/audit-format.md), and its payloads with the vault's box key.
  const journal = readFileSync(join(h.home, 'audit.log'));
  t.equal(journal.includes(CANARY), false, 'the secret is not in the journal');
  const lines = journal.toString('utf8').trimEnd().split('\n');
  const entries = lines.map((l) => JSON.parse(l) as Record<string, any>);
  const hashOf = (line: string): string =>
    Buffer.from(s.crypto_generichash(32, Buffer.from(line, 'utf8'), null)).toString('hex');
  t.equal(meta['journal_id'], entries[0]?.['journal_id'], "journal_id: the genesis entry's");
  const [headSeq, headHash] = String(meta['journal_head']).split(':');
  const headIndex = Number(headSeq) - 1;
  t.equal(hashOf(lines[headIndex] as string), headHash, 'journal_head names an entry of the journal with that hash');
  t.equal(entries[headIndex]?.['type'], 'event', 'the entry that records the write');
  const vaultEntries = entries.filter((e) => e['type'] === 'vault');
  t.equal(
    vaultEntries[vaultEntries.length - 1]?.['generation'],
    generation,
    "the last vault entry has the header's generation",
  );
  t.equal(
    vaultEntries[vaultEntries.length - 1]?.['vault_hash'],
    createHash('sha256').update(file).digest('hex'),
    'vault_hash: SHA-256 of the file',
  );

  const boxPublic = Buffer.from(audit.box_public, 'base64');
  const eventKeys = new Map<number, Uint8Array>();
  const payloads: Record<string, unknown>[] = [];
  for (const e of entries) {
    if (e['type'] === 'key')
      eventKeys.set(e['seq'], s.crypto_box_seal_open(Buffer.from(e['sealed'], 'base64'), boxPublic, boxSecret));
    if (e['type'] !== 'event') continue;
    const k = eventKeys.get(e['key_id']);
    t.ok(k, `event ${e['seq']}: its key entry came before it`);
    const text = Buffer.from(
      s.crypto_aead_xchacha20poly1305_ietf_decrypt(
        null,
        Buffer.from(e['ct'], 'base64'),
        Buffer.from(`${e['seq']}:${e['prev']}`, 'ascii'),
        Buffer.from(e['nonce'], 'base64'),
        k as Uint8Array,
      ),
    ).toString('utf8');
    t.equal(text.includes(CANARY), false, `event ${e['seq']}: no secret`);
    payloads.push(JSON.parse(text) as Record<string, unknown>);
  }
  const kinds = payloads.map((p) => p['kind']);
  for (const kind of ['daemon_start', 'unlock', 'cred_add', 'lock', 'daemon_stop'])
    t.ok(kinds.includes(kind), `a ${kind} event`);
  t.match(
    payloads.find((p) => p['kind'] === 'cred_add'),
    { credential: 'github', credential_kind: 'http', definition_hash: c.definition_hash, generation },
  );
});
