// `postern run -- CMD` under a terminal (SPEC §11, §5): Ctrl-C sends SIGINT
// to the whole foreground process group, so CMD gets it from the kernel
// already; run must not pass on a second copy. Programs treat a second
// interrupt as "stop now, skip the clean-up" (terraform, npm, docker
// compose), so one Ctrl-C must stay one interrupt for CMD. The same for a
// SIGTERM sent to the group (a supervisor stopping the job). A signal sent
// to run alone (its pid, not the group) still reaches CMD: the existing row
// in run-command.test.ts covers that. Two pending copies of a signal merge
// into one, so a single round may hide the doubling: the rows send several,
// spaced, and expect CMD to count exactly as many.
import t from 'tap';
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
fs.writeFileSync(${JSON.stringify(ready)}, 'ready');
setInterval(() => {
  if (fs.existsSync(${JSON.stringify(done)})) { fs.writeFileSync(${JSON.stringify(out)}, String(n)); process.exit(0); }
}, 50);`;

// Whether a second copy arrives before CMD took the first is a matter of
// scheduling (two pending copies of one signal are one): several rounds,
// each given time, make the doubling show.
const ROUNDS = 5;

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  t.test(
    `each ${signal} sent to run's process group reaches CMD once`,
    {
      todo: "known defect, not fixed yet: CMD shares run's process group, so a signal to the group reaches it from the kernel and again from run; telling the two apart needs the sender (siginfo)",
    },
    async (t) => {
      const { h, env } = await runsPeerHome(t);
      const ready = join(h.dir, 'ready');
      const out = join(h.dir, 'count');
      const done = join(h.dir, 'done');
      // Its own process group, as a shell's job in a terminal.
      const run = spawn(
        '/usr/bin/env',
        [
          '-u',
          'NODE_OPTIONS',
          process.execPath,
          CLI,
          'run',
          '--',
          process.execPath,
          '-e',
          counter(signal, ready, done, out),
        ],
        { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true },
      );
      let stderr = '';
      run.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      const exited = new Promise<number | null>((r) => run.on('exit', (c) => r(c)));
      t.ok(await eventually(() => existsSync(ready), 20_000), `CMD started ${stderr}`);
      // What the terminal does on Ctrl-C: the signal to every process of the group.
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
