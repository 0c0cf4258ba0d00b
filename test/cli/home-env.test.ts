// HOME empty or relative, POSTERN_HOME unset: the home went under the
// current directory (./.postern made by init with HOME=""). Refused now,
// naming HOME. Both rows failed before.
import t from 'tap';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cleanEnv, makeHome } from '../helpers/postern';
import { runTimed } from '../helpers/cli-timed';

for (const [what, home] of [
  ['empty', ''],
  ['relative', 'relative-home'],
] as const) {
  t.test(
    `HOME ${what}, no POSTERN_HOME: init refuses rather than making a home under the current directory`,
    async (t) => {
      const h = makeHome();
      t.teardown(() => h.cleanup());
      const cwd = mkdtempSync(join(tmpdir(), 'pt-cwd-'));
      t.teardown(() => rmSync(cwd, { recursive: true, force: true }));
      const env = cleanEnv({ HOME: home, POSTERN_HOME: undefined });
      const r = await runTimed(env, ['init', '--kdf', 'interactive', '--passphrase-file', h.passFile], {
        cwd,
        ms: 30_000,
      });
      const made = join(cwd, home, '.postern');
      t.notOk(
        existsSync(join(made, 'vault')),
        `no vault made in ${made} (exit ${r.code}: ${JSON.stringify(r.stdout.split('\n')[0])})`,
      );
      t.not(r.code, 0, 'refused');
      t.match(r.stderr, /HOME/, 'names HOME (or says to set POSTERN_HOME)');
    },
  );
}
