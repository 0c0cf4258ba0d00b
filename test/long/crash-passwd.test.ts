// An unlucky machine: the daemon is killed (SIGKILL, power cut) while
// `postern passwd` re-keys the vault. SPEC §8: "A crash at any moment leaves
// the old or the new vault." So afterwards exactly one of the old and the new
// passphrase opens the vault file, every credential is still there with its
// own secret, and the daemon unlocks with that passphrase (no
// rollback_detected: nobody rolled anything back). Checked offline with the
// documented format (docs/vault-format.md) and through the real daemon.
import t from 'tap';
import { join } from 'node:path';
import { cli, init, makeHome, startDaemon, PASSPHRASE, credAdd } from '../helpers/postern';
import { TestAdmin } from '../helpers/admin';
import { openVaultFile } from '../../shared/vault-format';

t.setTimeout(240_000);

const SECRET = 'tok_keep_me_0123456789abcdef';
const DEF = `name = "keep"\nkind = "http"\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\n`;

async function opens(path: string, pass: string): Promise<boolean> {
  try {
    const v = await openVaultFile(path, Buffer.from(pass));
    const meta = v.contents.meta as { credentials: { name: string; secret: number }[] };
    const keep = meta.credentials.find((c) => c.name === 'keep');
    if (!keep) throw new Error('credential "keep" lost');
    const s = v.contents.blobs[keep.secret]!.toString();
    if (s !== SECRET) throw new Error(`credential "keep" has another secret (${s.length} bytes)`);
    return true;
  } catch (e) {
    if (/wrong|authenticat/i.test(String((e as Error).message)) || (e as { code?: string }).code === 'wrong_passphrase')
      return false;
    throw e;
  }
}

t.test('SIGKILL at moments across passwd: old or new passphrase, nothing lost, unlock works', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0);
  const vault = join(h.home, 'vault');
  let current = PASSPHRASE;
  // How long one passwd takes here, so the kills spread across all of it.
  let duration = 0;
  {
    const d = await startDaemon(h);
    t.equal(cli(h, ['unlock', '--passphrase-file', h.passFile]).code, 0);
    const add = credAdd(h, 'd', DEF, SECRET + '\n');
    t.equal(add.code, 0, add.stderr);
    const a = await TestAdmin.connect(join(h.home, 'admin.sock'));
    const next = 'measured new passphrase';
    const t0 = Date.now();
    const r = await a.request('passwd', {}, [Buffer.from(current), Buffer.from(next)]);
    duration = Date.now() - t0;
    t.equal(r['ok'], true, 'a passwd without a crash works');
    current = next;
    a.close();
    await d.stop();
    t.comment(`one passwd takes ${duration} ms`);
  }
  const delays = [0.1, 0.3, 0.5, 0.7, 0.8, 0.85, 0.9, 0.95, 0.98, 1.0, 1.03, 1.06, 1.1, 1.15, 1.2, 1.3, 1.5, 2.0].map(
    (f) => Math.round(f * duration),
  );
  for (let i = 0; i < delays.length; i++) {
    const passFile = h.file(`cur${i}`, current + '\n');
    const d = await startDaemon(h);
    const u = cli(h, ['unlock', '--passphrase-file', passFile]);
    if (u.code !== 0) {
      t.fail(`round ${i}: the daemon does not unlock with the passphrase that opens the vault: ${u.stderr.trim()}`);
      d.proc.kill('SIGKILL');
      await d.exited;
      break;
    }
    const next = `new passphrase number ${i} ok`;
    const a = await TestAdmin.connect(join(h.home, 'admin.sock'));
    void a.request('passwd', {}, [Buffer.from(current), Buffer.from(next)]);
    await new Promise((r) => setTimeout(r, delays[i]));
    d.proc.kill('SIGKILL');
    await d.exited;
    a.close();
    const oldOk = await opens(vault, current);
    const newOk = await opens(vault, next);
    t.ok(
      oldOk !== newOk,
      `round ${i} (kill after ${delays[i]} ms): exactly one passphrase opens (old ${oldOk}, new ${newOk}), with "keep" and its secret`,
    );
    if (newOk) current = next;
  }
  // Last: the daemon unlocks with what opens the file, and the journal holds.
  const d = await startDaemon(h);
  t.teardown(() => d.stop());
  const u = cli(h, ['unlock', '--passphrase-file', h.file('final', current + '\n')]);
  t.equal(u.code, 0, `final unlock: ${u.stderr.trim()}`);
  const list = cli(h, ['cred', 'list', '--json']);
  t.match(list.stdout, /"keep"/, 'the credential is still listed');
  const v = cli(h, ['audit', 'verify', '--allow-unsigned-tail']);
  t.equal(v.code, 0, v.stdout + v.stderr);
});
