import t from 'tap';
import { Refusal } from '../../shared/errors';
import { sodiumReady } from '../../shared/crypto';
import { SealedSecrets } from '../../daemon/vault/sealed-secrets';

t.before(async () => {
  await sodiumReady();
});

t.test('seal and open; the sealed form does not contain the secret', async (t) => {
  const box = new SealedSecrets();
  const secret = Buffer.from('ghp_0123456789abcdef');
  const sealed = box.seal(secret);
  t.equal(sealed.nonce.length, 24);
  t.equal(sealed.ciphertext.length, secret.length + 16);
  t.equal(sealed.ciphertext.indexOf(secret.subarray(0, 8)), -1, 'ciphertext does not carry the plaintext');
  t.ok(Object.isFrozen(sealed));
  const again = box.seal(secret);
  t.not(again.nonce.toString('hex'), sealed.nonce.toString('hex'), 'a fresh nonce per seal');
  const opened = box.open(sealed);
  t.same(opened, secret);
  opened.fill(0);
  t.same(box.open(sealed), secret, 'wiping an opened copy does not affect the sealed one');
  secret.fill(0);
  t.equal(box.open(sealed).toString(), 'ghp_0123456789abcdef', 'the caller may wipe its input after sealing');
});

t.test('withOpen and withOpenAsync wipe the opened copy afterwards, also on throw', async (t) => {
  const box = new SealedSecrets();
  const sealed = box.seal(Buffer.from('token-value'));
  let seen: Buffer | null = null;
  const len = box.withOpen(sealed, (b) => {
    seen = b;
    return b.toString().length;
  });
  t.equal(len, 11);
  t.ok(
    (seen as unknown as Buffer).every((x) => x === 0),
    'wiped after a sync use',
  );

  let escaped: Buffer | null = null;
  t.throws(
    () =>
      box.withOpen(sealed, (b) => {
        escaped = b;
        throw new Error('boom');
      }),
    /boom/,
  );
  t.ok(
    (escaped as unknown as Buffer).every((x) => x === 0),
    'wiped after a throw',
  );

  let during = '';
  let held: Buffer | null = null;
  const result = await box.withOpenAsync(sealed, async (b) => {
    held = b;
    await new Promise((r) => setTimeout(r, 10));
    during = b.toString();
    return 'done';
  });
  t.equal(result, 'done');
  t.equal(during, 'token-value', 'still readable across an await');
  t.ok(
    (held as unknown as Buffer).every((x) => x === 0),
    'wiped once the promise settled',
  );

  await t.rejects(
    box.withOpenAsync(sealed, async (b) => {
      held = b;
      await new Promise((r) => setTimeout(r, 1));
      throw new Error('async boom');
    }),
    /async boom/,
  );
  t.ok(
    (held as unknown as Buffer).every((x) => x === 0),
    'wiped after a rejection',
  );
});

t.test('wipe destroys the key: nothing opens or seals afterwards', async (t) => {
  const box = new SealedSecrets();
  const sealed = box.seal(Buffer.from('s'));
  t.notOk(box.wiped);
  box.wipe();
  t.ok(box.wiped);
  t.throws(
    () => box.open(sealed),
    new Refusal('vault_locked', 'the vault was locked while this secret was needed; run `postern unlock` and retry'),
  );
  t.throws(() => box.seal(Buffer.from('s')), { code: 'vault_locked' });
  box.wipe(); // idempotent
});

t.test('a secret sealed by one instance, or altered, does not open', async (t) => {
  const a = new SealedSecrets();
  const b = new SealedSecrets();
  const sealed = a.seal(Buffer.from('secret'));
  t.throws(() => b.open(sealed), /failed authentication/);
  const altered = { nonce: sealed.nonce, ciphertext: Buffer.from(sealed.ciphertext) };
  altered.ciphertext[0] = (altered.ciphertext[0] as number) ^ 1;
  t.throws(() => a.open(altered), /failed authentication/);
});
