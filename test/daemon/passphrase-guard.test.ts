// The growing delay after wrong passphrases (SPEC §5: in the daemon, capped
// at 30 s): the delay function, the guard that applies it, and the real
// daemon answering consecutive wrong unlocks later and later.
import t from 'tap';
import { Refusal } from '../../shared/errors';
import { FIRST_DELAY_MS, MAX_DELAY_MS, PassphraseGuard, failureDelay } from '../../daemon/passphrase-guard';
import { join } from 'node:path';
import { PASSPHRASE, cli, init, makeHome, startDaemon } from '../helpers/postern';
import { TestAdmin } from '../helpers/admin';

const wrongMessage = (n: number): string =>
  `wrong passphrase (or the vault was modified); ${n} in a row, each further attempt waits longer; check it and try again`;

t.test('failureDelay doubles from 250 ms and stops at 30 s', async (t) => {
  t.equal(FIRST_DELAY_MS, 250);
  t.equal(MAX_DELAY_MS, 30_000);
  const expected: [number, number][] = [
    [0, 0],
    [1, 250],
    [2, 500],
    [3, 1000],
    [4, 2000],
    [5, 4000],
    [6, 8000],
    [7, 16_000],
    [8, 30_000],
    [9, 30_000],
    [10, 30_000],
    [11, 30_000],
    [12, 30_000],
  ];
  for (const [n, ms] of expected) t.equal(failureDelay(n), ms, `after ${n} consecutive failures`);
  t.equal(failureDelay(-1), 0, 'no failures, no delay');
  t.equal(failureDelay(10_000), 30_000, 'the cap holds for any count');
});

// Node's timers may fire up to a millisecond before Date.now() says the
// delay has passed (a 250 ms wait measured 249 ms in CI): a lower bound
// allows that much, no more.
const EARLY_MS = 2;
const atLeast = (ms: number, delay: number): boolean => ms >= delay - EARLY_MS;

// Runs a check through the guard; returns how long the answer took and
// the error, if any.
async function timed<T>(guard: PassphraseGuard, result: T | false): Promise<{ ms: number; error: unknown; value?: T }> {
  const start = Date.now();
  try {
    const value = await guard.run(async () => result);
    return { ms: Date.now() - start, error: null, value };
  } catch (e) {
    return { ms: Date.now() - start, error: e };
  }
}

t.test('the guard delays each failure by failureDelay(n); a success resets the count', async (t) => {
  const guard = new PassphraseGuard();
  const first = await timed(guard, false);
  t.same(first.error, new Refusal('wrong_passphrase', wrongMessage(1)));
  t.ok(atLeast(first.ms, failureDelay(1)), `first failure answered after ${first.ms} ms`);
  const second = await timed(guard, false);
  t.same(second.error, new Refusal('wrong_passphrase', wrongMessage(2)));
  t.ok(atLeast(second.ms, failureDelay(2)), `second failure answered after ${second.ms} ms`);
  t.equal(guard.consecutiveFailures, 2);

  const ok = await timed(guard, 'opened');
  t.equal(ok.value, 'opened');
  t.ok(ok.ms < failureDelay(1), `a right passphrase is not delayed (${ok.ms} ms)`);
  t.equal(guard.consecutiveFailures, 0, 'reset by the success');

  const again = await timed(guard, false);
  t.same(again.error, new Refusal('wrong_passphrase', wrongMessage(1)), 'counted from one again');
  t.ok(
    atLeast(again.ms, failureDelay(1)) && again.ms < failureDelay(3),
    `the first delay again (${again.ms} ms), not the third`,
  );
});

t.test('checks run one at a time: a check waits for the delay of the one before', async (t) => {
  const guard = new PassphraseGuard();
  const start = Date.now();
  let secondStarted = -1;
  const wrong = guard.run(async () => false).catch((e: unknown) => e);
  const right = guard.run(async () => {
    secondStarted = Date.now() - start;
    return true;
  });
  t.same(await wrong, new Refusal('wrong_passphrase', wrongMessage(1)));
  t.equal(await right, true);
  // Timers run on the monotonic clock and Date.now() is the wall clock,
  // each rounded to a millisecond: the delay may read up to 2 ms short.
  t.ok(atLeast(secondStarted, failureDelay(1)), `the second check started after ${secondStarted} ms`);
});

// Each wrong attempt takes the key derivation (Argon2id, libsodium in
// WebAssembly: about a second on a quiet machine, 2-3 s with a varying
// spread of ±0.6 s on a loaded one) plus the delay, so the comparison is made
// where the delays stand out from that spread: the 4th and 5th attempts
// against the 1st.
t.test('the real daemon answers later and later attempts later, measured against the first', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0);
  const d = await startDaemon(h);
  t.teardown(() => d.stop());

  // The CLI's view first: exit 1 and the daemon's message with the count.
  const wrongFile = h.file('wrong', 'definitely not it\n');
  const r = cli(h, ['unlock', '--passphrase-file', wrongFile]);
  t.equal(r.code, 1);
  t.equal(r.stderr, `postern: ${wrongMessage(1)}\n`);

  // Then straight over admin.sock, so that a CLI process starting up does
  // not add to the times.
  const admin = await TestAdmin.connect(join(h.home, 'admin.sock'));
  t.teardown(() => admin.close());
  const unlock = async (pass: string): Promise<{ ms: number; reply: Record<string, unknown> }> => {
    const start = Date.now();
    const reply = await admin.request('unlock', {}, [Buffer.from(pass)]);
    return { ms: Date.now() - start, reply };
  };
  t.match((await unlock(PASSPHRASE)).reply, { ok: true }, 'the right passphrase opens it after a wrong one');
  t.match(await admin.request('lock'), { ok: true });

  const took: number[] = [];
  for (let n = 1; n <= 5; n++) {
    // The daemon starts its next derivation worker as it answers; let it
    // be ready, as it would be for a human typing again.
    await new Promise((res) => setTimeout(res, 300));
    const { ms, reply } = await unlock('definitely not it');
    took.push(ms);
    t.same(
      reply['error'],
      { code: 'wrong_passphrase', message: wrongMessage(n) },
      n === 1 ? 'attempt 1: counted from 1 again after the success' : `attempt ${n}`,
    );
  }
  const [first, , , fourth, fifth] = took as [number, number, number, number, number];
  const times = `attempts took ${took.join(', ')} ms`;
  t.ok(
    fourth - first >= failureDelay(2),
    `${times}: the 4th ${fourth - first} ms longer than the 1st (delays ${failureDelay(4)} vs ${failureDelay(1)})`,
  );
  t.ok(
    fifth - first >= failureDelay(4),
    `${times}: the 5th ${fifth - first} ms longer than the 1st (delays ${failureDelay(5)} vs ${failureDelay(1)})`,
  );
  const counts = [...d.logs().matchAll(/"kind":"passphrase_refused","during":"unlock","consecutive":(\d+)/g)].map((m) =>
    Number(m[1]),
  );
  t.same(counts, [1, 1, 2, 3, 4, 5], 'each refusal is logged with its count');
});
