// `postern run -- CMD` under a terminal (SPEC §11, §5): Ctrl-C sends SIGINT
// to the whole foreground process group, so CMD gets it from the kernel
// already; run must not pass on a second copy. Programs treat a second
// interrupt as "stop now, skip the clean-up" (terraform, npm, docker
// compose) and an agent's CLI as "exit", so one Ctrl-C must stay one
// interrupt for CMD. The terminal here is a real one: `script` runs run on
// a pseudo-terminal, where run is in the foreground group, and the test
// types Ctrl-C into it. Outside a terminal's foreground a SIGINT sent to
// run alone still reaches CMD (run-command.test.ts); one sent to run's
// process group from outside reaches CMD twice, and nothing run can read
// tells the two apart (a signal carries its sender, not its target): that
// row stays a todo naming the limit (docs/operations.md). Two pending
// copies of a signal merge into one, so a single round may hide the
// doubling: the rows send several, spaced, and expect CMD to count exactly
// as many.
import t, { type Test } from 'tap';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CLI, eventually } from '../helpers/postern';
import { runsPeerHome } from '../helpers/runs-peer';

// CMD: counts the given signal; when the test says it is done, writes the
// count and exits 0.
const counter = (signal: string, ready: string, done: string, out: string): string => `
const fs = require('node:fs');
let n = 0;
process.on('${signal}', () => { n += 1; });
fs.writeFileSync(${JSON.stringify(ready)}, String(process.ppid));
setInterval(() => {
  if (fs.existsSync(${JSON.stringify(done)})) { fs.writeFileSync(${JSON.stringify(out)}, String(n)); process.exit(0); }
}, 50);`;

// Whether a second copy arrives before CMD took the first is a matter of
// scheduling (two pending copies of one signal are one): several rounds,
// each given time, make the doubling show.
const ROUNDS = 5;

// `postern run -- node FILE`, as /usr/bin/env's arguments.
const RUN = ['-u', 'NODE_OPTIONS', process.execPath, CLI, 'run', '--', process.execPath];

const quote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

// run under a real terminal, CMD counting `signal`; CMD writes run's pid
// (its parent) to the ready file.
async function underTerminal(t: Test, signal: string) {
  const { h, env } = await runsPeerHome(t);
  const ready = join(h.dir, 'ready');
  const out = join(h.dir, 'count');
  const done = join(h.dir, 'done');
  const cmdFile = join(h.dir, 'counter.js');
  writeFileSync(cmdFile, counter(signal, ready, done, out));
  const line = ['exec', '/usr/bin/env', ...RUN, cmdFile].map(quote).join(' ');
  // script(1) starts a shell on a new pseudo-terminal and copies its own
  // standard input to the terminal: a 0x03 byte there is what a keyboard's
  // Ctrl-C is, and the terminal's line discipline turns it into SIGINT for
  // its foreground group (run and CMD).
  const term = spawn('script', ['-q', '-e', '-c', line, '/dev/null'], {
    env: { ...env, SHELL: '/bin/sh' },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let output = '';
  term.stdout.on('data', (d: Buffer) => (output += d.toString()));
  term.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<number | null>((r) => term.on('exit', (c) => r(c)));
  t.ok(
    await eventually(() => existsSync(ready) && readFileSync(ready, 'utf8') !== '', 20_000),
    `CMD started ${output}`,
  );
  return {
    term,
    runPid: Number(readFileSync(ready, 'utf8')),
    // Tells CMD to stop; its count and the terminal's status.
    finish: async (): Promise<{ status: number | null; count: string; output: string }> => {
      writeFileSync(done, '');
      const status = await exited;
      term.stdin.end();
      return { status, count: readFileSync(out, 'utf8'), output };
    },
  };
}

t.test('each Ctrl-C typed on the terminal reaches CMD once', async (t) => {
  const { term, finish } = await underTerminal(t, 'SIGINT');
  for (let i = 0; i < ROUNDS; i++) {
    term.stdin.write('\x03');
    await new Promise((r) => setTimeout(r, 300));
  }
  const { status, count, output } = await finish();
  t.equal(status, 0, `the terminal's command exited 0 ${output}`);
  t.equal(count, String(ROUNDS), `CMD saw ${ROUNDS} SIGINTs, one per Ctrl-C`);
});

t.test('under a terminal, each SIGTERM sent to run alone still reaches CMD once', async (t) => {
  const { runPid, finish } = await underTerminal(t, 'SIGTERM');
  for (let i = 0; i < ROUNDS; i++) {
    process.kill(runPid, 'SIGTERM');
    await new Promise((r) => setTimeout(r, 300));
  }
  const { status, count, output } = await finish();
  t.equal(status, 0, `the terminal's command exited 0 ${output}`);
  t.equal(count, String(ROUNDS), `CMD saw ${ROUNDS} SIGTERMs, one per signal sent to run`);
});

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  t.test(
    `each ${signal} sent to run's process group from outside a terminal reaches CMD once`,
    {
      todo: "known limit: CMD shares run's process group, so a signal sent to the group reaches it from the kernel and again from run; a signal carries its sender, not whether it was sent to the group, so run cannot tell this from a signal sent to it alone (which must reach CMD)",
    },
    async (t) => {
      const { h, env } = await runsPeerHome(t);
      const ready = join(h.dir, 'ready');
      const out = join(h.dir, 'count');
      const done = join(h.dir, 'done');
      // Its own process group and session, no terminal: a supervisor's job.
      const cmdFile = join(h.dir, 'counter.js');
      writeFileSync(cmdFile, counter(signal, ready, done, out));
      const run = spawn('/usr/bin/env', [...RUN, cmdFile], { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
      let stderr = '';
      run.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      const exited = new Promise<number | null>((r) => run.on('exit', (c) => r(c)));
      t.ok(await eventually(() => existsSync(ready), 20_000), `CMD started ${stderr}`);
      for (let i = 0; i < ROUNDS; i++) {
        process.kill(-run.pid!, signal);
        await new Promise((r) => setTimeout(r, 300));
      }
      writeFileSync(done, '');
      t.equal(await exited, 0, "CMD's status");
      t.equal(readFileSync(out, 'utf8'), String(ROUNDS), `CMD saw ${ROUNDS} ${signal}s, one per signal sent`);
    },
  );
}
