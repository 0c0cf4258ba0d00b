// The store of replaced versions: newest first, the last MAX_FORMER of each
// name, the keys of those pushed out handed back (their redactors go), no
// key a credential name can take, everything gone at clear (the lock).
import t from 'tap';
import { FormerValues, MAX_FORMER } from '../../daemon/stores/former-values';
import type { CredentialDef } from '../../shared/credential';
import type { SealedSecret } from '../../daemon/vault/sealed-secrets';
import { NAME_PATTERN } from '../../shared/credential/fields';

const def = (name: string): CredentialDef => ({ name }) as unknown as CredentialDef;
const sealed = (n: number): SealedSecret => ({ nonce: Buffer.from([n]), ciphertext: Buffer.from([n]) });

t.test('the last MAX_FORMER versions of each name are kept, newest first', async (t) => {
  const f = new FormerValues();
  const dropped: string[] = [];
  for (let i = 0; i < MAX_FORMER; i++) t.same(f.keep(def('a'), sealed(i)), [], `version ${i} fits`);
  t.same(f.keep(def('b'), sealed(100)), [], 'another name has its own room');
  const keysBefore = f.versions().map((v) => v.key);
  dropped.push(...f.keep(def('a'), sealed(MAX_FORMER)));
  t.equal(dropped.length, 1, 'one more pushes the oldest of that name out');
  t.equal(dropped[0], keysBefore[MAX_FORMER - 1], 'the oldest');
  const a = f.versions().filter((v) => v.definition.name === 'a');
  t.same(
    a.map((v) => v.secret.nonce[0]),
    [4, 3, 2, 1],
    'newest first',
  );
  t.equal(f.size, MAX_FORMER + 1);
  const keys = f.versions().map((v) => v.key);
  t.equal(new Set(keys).size, keys.length, 'keys are unique');
  for (const k of keys) t.notOk(NAME_PATTERN.test(k), `${k}: no credential can be named so`);
  f.clear();
  t.equal(f.size, 0);
  t.same(f.versions(), []);
  f.keep(def('a'), sealed(9));
  t.notOk(keys.includes(f.versions()[0]!.key), 'a key is never given twice');
});
