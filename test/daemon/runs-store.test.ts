// The placeholder rules of SPEC §11 on the run store, with real processes
// identified from /proc: a placeholder resolves for its run's root and the
// processes it starts, never for an unrelated process, and stops resolving
// when the root exits (seen at lookup and by the sweeper), at lock
// (endAll), and when its credential is removed. Runs are bounded per
// process instance and in all.
import t from 'tap';
import { spawn, ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import {
  Runs,
  Run,
  RunEndReason,
  RUN_LIMITS,
  looksLikePlaceholder,
  PLACEHOLDER_IN_TEXT,
} from '../../daemon/stores/runs';
import { identify, Identity } from '../../daemon/identity/identify';
import { Refusal } from '../../shared/errors';
import { eventually } from '../helpers/postern';

const UID = process.getuid!();
const started: ChildProcess[] = [];
t.teardown(() => {
  for (const p of started) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
});

function start(argv: string[]): ChildProcess {
  const p = spawn(argv[0]!, argv.slice(1), { stdio: 'ignore' });
  started.push(p);
  return p;
}

function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

// A shell that stays (it waits) with a `sleep` child: a root and its descendant.
async function tree(): Promise<{ shell: ChildProcess; root: Identity; child: Identity }> {
  const shell = start(['/bin/sh', '-c', 'sleep 60 & wait']);
  let kid = 0;
  await eventually(() => (kid = childrenOf(shell.pid!)[0] ?? 0) > 0, 5000);
  // The shell may still be between fork and exec: wait for the child to be sleep.
  await eventually(() => readFileSync(`/proc/${kid}/cmdline`, 'utf8').startsWith('sleep'), 5000);
  return { shell, root: identify(shell.pid!, UID), child: identify(kid, UID) };
}

async function sleeper(): Promise<Identity> {
  const p = start(['sleep', '60']);
  await eventually(() => {
    try {
      return readFileSync(`/proc/${p.pid}/cmdline`, 'utf8').startsWith('sleep');
    } catch {
      return false;
    }
  }, 5000);
  return identify(p.pid!, UID);
}

function store(): { runs: Runs; ended: [string, RunEndReason][] } {
  const ended: [string, RunEndReason][] = [];
  return { runs: new Runs((run: Run, reason) => ended.push([run.id, reason])), ended };
}

const CREDS = [
  { name: 'github', env: ['GH_TOKEN'] },
  { name: 'my.api-1', env: [] },
];

t.test(
  'placeholders have the shape, are random per run, and resolve for the root and its descendants only',
  async (t) => {
    const { runs } = store();
    const { root, child } = await tree();
    const unrelated = await sleeper();
    const a = runs.create(root, CREDS);
    const b = runs.create(root, CREDS);
    const pa = a.placeholders.get('github')!;
    const dotted = a.placeholders.get('my.api-1')!;
    t.match(pa, /^postern-github-[0-9a-f]{16}$/);
    t.match(dotted, /^postern-my\.api-1-[0-9a-f]{16}$/);
    t.ok(looksLikePlaceholder(pa) && looksLikePlaceholder(dotted));
    t.not(pa, b.placeholders.get('github'), 'another run, another placeholder');

    t.same(runs.resolvePlaceholder(pa, root), { run: a, credential: 'github' }, 'the root');
    t.same(runs.resolvePlaceholder(pa, child), { run: a, credential: 'github' }, 'a process the root started');
    t.same(runs.resolvePlaceholder(dotted, child)?.credential, 'my.api-1', 'a name with "." and "-"');
    t.equal(runs.resolvePlaceholder(pa, unrelated), null, 'an unrelated process');
    const self = identify(process.pid, UID);
    t.equal(runs.resolvePlaceholder(pa, self), null, "the root's parent is not in the run");

    // Near misses: one hex digit off, another credential's name, upper case, padding.
    const last = pa.slice(-1) === '0' ? '1' : '0';
    for (const v of [
      pa.slice(0, -1) + last,
      pa.replace('github', 'gitlab'),
      pa.toUpperCase(),
      ` ${pa}`,
      `${pa}\n`,
      `${pa}0`,
      '',
    ])
      t.equal(runs.resolvePlaceholder(v, root), null, `refused: ${JSON.stringify(v)}`);
    // Another run's placeholder with this run's name is still the other run's.
    t.equal(runs.resolvePlaceholder(b.placeholders.get('github')!, child)?.run, b);
  },
);

t.test('looksLikePlaceholder: the shape only', async (t) => {
  for (const v of ['postern-a-0123456789abcdef', 'postern-a.b_c-d-0123456789abcdef']) t.ok(looksLikePlaceholder(v), v);
  for (const v of [
    'postern--0123456789abcdef',
    'postern-A-0123456789abcdef',
    'postern-a-0123456789ABCDEF',
    'postern-a-0123456789abcde',
    'postern-a-0123456789abcdef0',
    'Bearer postern-a-0123456789abcdef',
    'postern-a',
  ])
    t.notOk(looksLikePlaceholder(v), v);
  t.ok(PLACEHOLDER_IN_TEXT.test('{"token": "postern-github-0123456789abcdef"}'), 'found inside a text');
  t.notOk(PLACEHOLDER_IN_TEXT.test('postern-github-0123456789abcdef0'), 'not when more hex follows');
});

t.test('a run ends when its root exits: at the next lookup, and by the sweeper without one', async (t) => {
  const { runs, ended } = store();
  const first = await tree();
  const a = runs.create(first.root, CREDS);
  first.shell.kill('SIGKILL');
  await eventually(() => {
    try {
      readFileSync(`/proc/${first.shell.pid}/stat`);
      return false;
    } catch {
      return true;
    }
  }, 5000);
  t.equal(runs.resolvePlaceholder(a.placeholders.get('github')!, first.child), null, 'a descendant that outlived it');
  t.same(ended, [[a.id, 'root_exited']]);

  const second = await tree();
  const b = runs.create(second.root, CREDS);
  second.shell.kill('SIGKILL');
  t.ok(await eventually(() => ended.some(([id]) => id === b.id), 4000), 'the sweeper ends it within about a second');
  t.same(ended[1], [b.id, 'root_exited']);
  t.same(runs.list(), []);
});

t.test('lock ends every run; removing a credential stops its placeholders', async (t) => {
  const { runs, ended } = store();
  const { root, child } = await tree();
  const a = runs.create(root, CREDS);
  const only = runs.create(root, [{ name: 'github', env: [] }]);
  runs.forgetCredential('github');
  t.equal(runs.resolvePlaceholder(a.placeholders.get('github')!, child), null, 'the removed credential');
  t.equal(runs.resolvePlaceholder(a.placeholders.get('my.api-1')!, child)?.run, a, 'the other one still resolves');
  t.same(ended, [[only.id, 'revoked']], 'a run left with nothing ends as revoked');
  t.equal(runs.endAll('locked'), 1);
  t.same(ended[1], [a.id, 'locked']);
  t.equal(runs.resolvePlaceholder(a.placeholders.get('my.api-1')!, child), null, 'nothing resolves after lock');
});

t.test(`at most ${RUN_LIMITS.perInstance} live runs per process and ${RUN_LIMITS.total} in all`, async (t) => {
  const { runs } = store();
  const roots = await Promise.all(
    Array.from({ length: RUN_LIMITS.total / RUN_LIMITS.perInstance + 1 }, () => sleeper()),
  );
  const busy = (f: () => unknown): Refusal => {
    try {
      f();
    } catch (e) {
      if (e instanceof Refusal) return e;
      throw e;
    }
    throw new Error('not refused');
  };
  for (let i = 0; i < RUN_LIMITS.perInstance; i += 1) runs.create(roots[0]!, CREDS);
  const perProcess = busy(() => runs.create(roots[0]!, CREDS));
  t.equal(perProcess.code, 'busy');
  t.match(perProcess.message, new RegExp(`already has ${RUN_LIMITS.perInstance} live runs, the limit per process`));
  for (const root of roots.slice(1, -1)) for (let i = 0; i < RUN_LIMITS.perInstance; i += 1) runs.create(root, CREDS);
  t.equal(runs.list().length, RUN_LIMITS.total);
  const total = busy(() => runs.create(roots.at(-1)!, CREDS));
  t.equal(total.code, 'busy');
  t.match(total.message, new RegExp(`holds ${RUN_LIMITS.total} live runs, the most it keeps`));
  runs.endAll('locked');
  t.ok(runs.create(roots.at(-1)!, CREDS), 'room again once runs end');
  runs.endAll('locked');
});
