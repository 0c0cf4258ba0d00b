// The vault's generation only grows (docs/vault-format.md), and the journal
// records each write's generation in clear so that an older vault put back
// is detected at unlock (SPEC §8). A `vault` entry anyone can write (it needs
// no key, and after the last checkpoint nothing signs it yet) must not be
// able to vouch for an older vault: neither the unlock check nor a later
// `audit verify` pinned to the key and to a head noted earlier may accept a
// journal whose vault generation goes back.
import t from 'tap';
import * as fs from 'node:fs';
import { Journal } from '../../daemon/audit/journal';
import { checkRollback } from '../../daemon/vault/rollback';
import { GenesisEntry, encodeEntry, sodiumReady } from '../../shared/audit-format';
import { verifyJournal } from '../../shared/audit-verify';
import { AuditKeys, auditKeys, newJournal, readJournal, scratchDir } from '../helpers/journal-writer-driver';

const SIZE = 64 * 1024 * 1024;

let keys: AuditKeys;
t.before(async () => {
  await sodiumReady();
  keys = auditKeys();
});

t.test('a vault entry appended with an older generation vouches for nothing', async (t) => {
  const file = await newJournal(scratchDir(t, 'postern-vault-order-'), keys);
  const pubkey = keys.sign.publicKey.toString('base64');
  const hashOld = 'a'.repeat(64);
  let j = await Journal.open({ path: file, segmentSize: SIZE });
  await j.setSigningKey(keys.sign.privateKey);
  // Generation 2: the vault an agent kept a copy of (a credential since removed, say).
  const h2 = await j.append({ kind: 'cred_add', credential: 'old', generation: 2 });
  await j.appendVault(2, hashOld);
  for (let i = 0; i < 5; i++) await j.append({ kind: 'filler', i });
  // Generation 3: the vault as it is now.
  await j.append({ kind: 'cred_rm', credential: 'old', generation: 3 });
  await j.appendVault(3, 'b'.repeat(64));
  await j.close();
  const noted = readJournal(file).entries.at(-1);
  t.ok(noted, 'a head an auditor noted');
  if (!noted) return;
  const journalId = (readJournal(file).entries[0]?.entry as GenesisEntry).journal_id;
  const oldVault = { journalId, journalHead: `${h2.seq}:${h2.hash}`, generation: 2 };

  // The daemon stopped; the old vault is put back and one line appended.
  const forged = encodeEntry(noted.entry.seq + 1, noted.hash, new Date().toISOString(), {
    type: 'vault',
    generation: 2,
    vault_hash: hashOld,
  });
  fs.appendFileSync(file, Buffer.concat([forged, Buffer.from('\n')]));

  j = await Journal.open({ path: file, segmentSize: SIZE });
  const verdict = await checkRollback(oldVault, j);
  t.match(verdict, { ok: false }, `unlock refuses the older vault (${JSON.stringify(verdict)})`);
  // As an unlock that went ahead would: the key loaded, later entries signed.
  await j.setSigningKey(keys.sign.privateKey);
  await j.append({ kind: 'unlock', outcome: 'ok', generation: 2 });
  await j.close();

  const r = await verifyJournal(file, { pubkey, expectHead: { seq: noted.entry.seq, hash: noted.hash } });
  t.equal(r.ok, false, `audit verify does not pass it (${r.problem?.kind ?? 'ok'})`);
  t.equal(r.problem?.seq, noted.entry.seq + 1, 'the problem is the vault entry whose generation goes back');
});
