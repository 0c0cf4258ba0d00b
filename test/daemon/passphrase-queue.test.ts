// Passphrase checks wait their turn, but at most 4 wait at once (SPEC §7):
// beyond that an attempt is refused at once as busy, so wrong proofs
// arriving on admin.sock without pause delay a right one by at most 4 of the
// growing delays, never for hours. The guard alone, then the real daemon.
import t from 'tap';
import { join } from 'node:path';
import { Refusal } from '../../shared/errors';
import { MAX_WAITING, PassphraseGuard, failureDelay } from '../../daemon/passphrase-guard';
import { PASSPHRASE, init, makeHome, startDaemon } from '../helpers/postern';
import { TestAdmin } from '../helpers/admin';

const BUSY = `4 passphrase checks are already waiting (each wrong one is answered after a growing delay); try again in a moment`;

t.test('the guard: one running, 4 waiting, the next refused at once', async (t) => {
  t.equal(MAX_WAITING, 4);
  const guard = new PassphraseGuard();
  let release: () => void = () => undefined;
  const gate = new Promise<void>((r) => (release = r));
  const running = guard.run(async () => {
    await gate;
    return 'first' as const;
  });
  const queued = Array.from({ length: 4 }, (_, i) => guard.run(async () => `queued ${i}`));
  const start = Date.now();
  const refused = await guard.run(async () => 'sixth').catch((e: unknown) => e);
  t.ok(Date.now() - start < 100, 'refused at once');
  t.same(refused, new Refusal('busy', BUSY, { waiting: 4 }));
  release();
  t.equal(await running, 'first');
  t.same(await Promise.all(queued), ['queued 0', 'queued 1', 'queued 2', 'queued 3']);
  t.equal(await guard.run(async () => 'later'), 'later', 'room again once they ran');
});

interface Timed {
  ms: number;
  reply: Record<string, unknown>;
}

t.test(
  'wrong proofs keep arriving on admin.sock: the right one is busy at once or answered after at most 4 delays',
  async (t) => {
    const h = makeHome();
    t.teardown(() => h.cleanup());
    t.equal(init(h).code, 0);
    const d = await startDaemon(h);
    t.teardown(() => d.stop());
    const sock = join(h.home, 'admin.sock');
    // One connection for the guesses, so they arrive in the order sent.
    const attacker = [await TestAdmin.connect(sock)];
    const human = await TestAdmin.connect(sock);
    t.teardown(() => {
      for (const a of [...attacker, human]) a.close();
    });
    let n = 0;
    const send = (who: TestAdmin, pass: string): Promise<Timed> => {
      const start = Date.now();
      return who.request('unlock', {}, [Buffer.from(pass)]).then((reply) => ({ ms: Date.now() - start, reply }));
    };
    const wrong = (): Promise<Timed> => send(attacker[n++ % attacker.length]!, `wrong guess ${n}`);
    // A reply within `ms`, or null: before, a right passphrase queued behind
    // the wrong ones waited for every one of their delays.
    const within = <T>(p: Promise<T>, ms: number): Promise<T | null> =>
      Promise.race([p, new Promise<null>((r) => setTimeout(() => r(null), ms))]);
    const busyAtOnce = (r: Timed | null, what: string): void => {
      t.ok(r, `${what}: answered at once`);
      if (!r) return;
      t.same(r.reply['error'], { code: 'busy', message: BUSY, waiting: 4 }, `${what}: busy, saying why`);
      t.ok(r.ms < 3000, `${what}: in ${r.ms} ms`);
    };

    // Ten wrong proofs at once: one runs, four wait, five are refused.
    const burst = Array.from({ length: 10 }, wrong);
    const firstRefusals = await within(Promise.all(burst.slice(5)), 3000);
    t.ok(firstRefusals, 'the five beyond the queue are answered at once');
    for (const r of firstRefusals ?? []) busyAtOnce(r, 'a wrong proof beyond the queue');

    // The human now: refused at once, not queued behind the guesses.
    busyAtOnce(await within(send(human, PASSPHRASE), 3000), 'the right passphrase while 4 wait');
    if (!firstRefusals) return;

    // As soon as the first guess is answered there is room for one: the
    // human takes it, and is answered after the running check and the 3
    // before it, however many guesses keep arriving meanwhile.
    const first = await burst[0]!;
    t.match(first.reply['error'], { code: 'wrong_passphrase' });
    const right = send(human, PASSPHRASE);
    // Guesses sent while the human waits: refused at once while 4 wait; one
    // that finds room as a check starts waits behind the human.
    const meanwhile: (Timed | null)[] = [];
    const stream = setInterval(() => {
      const i = meanwhile.push(null) - 1;
      void wrong().then((r) => (meanwhile[i] = r));
    }, 100);
    // Each check derives a key (about a second here, several on a loaded
    // machine) and each wrong one adds its delay: failures 2 to 5 are ahead.
    // Without the bound the human waited for the 9 guesses queued first.
    const bound = [2, 3, 4, 5].reduce((s, k) => s + failureDelay(k), 0) + 5 * 8000;
    const answered = await within(right, bound);
    clearInterval(stream);
    t.ok(answered, `the right passphrase is answered within ${bound} ms`);
    t.match(answered?.reply, { ok: true, result: { locked: false } }, 'and unlocks');
    await new Promise((r) => setTimeout(r, 1000));
    const settled = meanwhile.filter((r): r is Timed => r !== null);
    const busy = settled.filter((r) => (r.reply['error'] as { code?: string } | undefined)?.code === 'busy');
    t.ok(
      meanwhile.length > 10 && busy.length > meanwhile.length / 2,
      `${meanwhile.length} more wrong proofs arrived meanwhile, ${busy.length} refused as busy`,
    );
    for (const r of busy) busyAtOnce(r, 'a wrong proof while the queue is full');
    // One sent as the unlock was answered finds the vault open already.
    for (const r of settled) {
      if (busy.includes(r)) continue;
      if (r.reply['ok'] === true)
        t.match(r.reply, { result: { already_unlocked: true } }, 'a guess after the unlock changes nothing');
      else
        t.match(
          r.reply,
          { ok: false, error: { code: 'wrong_passphrase' } },
          'a guess that found room was checked, and wrong',
        );
    }
    for (const r of await Promise.all(burst.slice(1, 5)))
      t.match(r.reply['error'], { code: 'wrong_passphrase' }, 'the queued guesses were checked in turn');
  },
);
