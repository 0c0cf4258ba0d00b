// SPEC §7: the card flags a requester in a mount namespace other than the
// daemon's, and an executable whose path, looked up by the daemon, is not
// the file the process runs. The attack: in its own mount namespace an
// agent bind-mounts its own binary over /usr/bin/git and runs it; the
// kernel names the executable /usr/bin/git.
import t from 'tap';
import { copyFileSync, chmodSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import { startStack, Card } from '../helpers/stack';
import { runHolder, writeHolder } from '../helpers/identity-holder';
import { readCard } from '../../cli/approver/card';
import { renderCard } from '../../cli/approver/render';
import { EXE_MISMATCH_NOTE, OTHER_MOUNT_NS_NOTE } from '../../shared/admin-protocol';

const GIT = '/usr/bin/git';
const PYTHON = realpathSync('/usr/bin/python3');

t.test('the card says when the exe path may not be the program that runs', async (t) => {
  const s = await startStack();
  t.teardown(() => s.close());
  s.addCredential(
    'api',
    `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${s.up.port}]\nmethods = ["GET"]\npaths = ["/v1/*"]\n`,
    'forged-secret-0123456789',
  );
  const holder = writeHolder();
  t.teardown(() => holder.cleanup());
  const cards: Card[] = [];
  await s.approver((card) => (cards.push(card), { decision: 'deny' }));
  const body = JSON.stringify({ credential: 'api', method: 'GET', url: s.url('api.example.test', '/v1/x') });
  const fake = join(holder.dir, 'not-git');
  copyFileSync(PYTHON, fake);
  chmodSync(fake, 0o755);

  const ask = async (prefix: string[]): Promise<{ card: Card & { process: { exe: string } }; text: string }> => {
    const before = cards.length;
    const run = runHolder(holder, ['once', s.sock, body], prefix);
    t.teardown(() => void run.proc.kill('SIGKILL'));
    await run.done;
    t.match(run.replies[0], { status: 403, code: 'denied_by_user' }, JSON.stringify(run.replies));
    t.equal(cards.length, before + 1, 'one card');
    const card = cards[before]! as Card & { process: { exe: string } };
    return { card, text: renderCard(readCard(card)!).join('\n') };
  };

  await t.test("in the daemon's mount namespace, the real file: no flag", async (t) => {
    const { card, text } = await ask(['/usr/bin/python3']);
    t.equal(card.process.exe, PYTHON);
    t.notMatch(text, /WARNING/);
  });

  await t.test('another mount namespace: flagged', async (t) => {
    const { card, text } = await ask(['unshare', '-m', '--propagation', 'private', '/usr/bin/python3']);
    t.equal(card.process.exe, `${PYTHON}  ${OTHER_MOUNT_NS_NOTE}`, 'the path, with the namespace note');
    t.match(text, /WARNING: the exe path shown may not be the program that runs/);
  });

  await t.test('its own binary bind-mounted over /usr/bin/git in its own namespace: both flags', async (t) => {
    const { card, text } = await ask([
      'unshare',
      '-m',
      '--propagation',
      'private',
      'sh',
      '-c',
      `mount --bind ${fake} ${GIT} && exec ${GIT} "$@"`,
      'sh',
    ]);
    t.equal(
      card.process.exe,
      `${GIT}  ${OTHER_MOUNT_NS_NOTE}  ${EXE_MISMATCH_NOTE}`,
      'not shown as plain /usr/bin/git',
    );
    t.match(text, /not the file the process runs/);
    t.match(text, /WARNING: the exe path shown may not be the program that runs/);
  });
});
