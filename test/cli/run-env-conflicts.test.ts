// Two credentials that name the same variable in `env` (SPEC §11): the
// daemon gives the variable to the first and lists the others in the
// reply's `conflicts`. `postern run` must tell the human which credential
// the variable stands for and which were left out (one warning line on
// stderr naming the variable and both credentials), since a program that
// reads the variable will use that credential, not the other. Real daemon,
// real `postern run`; CMD prints the variable.
import t from 'tap';
import { startStack } from '../helpers/stack';
import { cliBytes } from '../helpers/cli-bytes';
import { makeCanary } from '../helpers/canary';

const httpDef = (name: string, env: string) =>
  `name = "${name}"\nkind = "http"\n${env}\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n\n[[allow]]\nhost = "api.example.test"\n`;

t.test('a variable two credentials name: the one left out is said', async (t) => {
  const s = await startStack();
  t.teardown(() => s.close());
  const secret = makeCanary('CONFLICTSECRET');
  s.addCredential('github-work', httpDef('github-work', 'env = ["GH_TOKEN"]'), secret);
  s.addCredential('github-personal', httpDef('github-personal', 'env = ["GH_TOKEN"]'), secret);
  const r = await cliBytes(s.h.env, ['run', '--', 'sh', '-c', 'printf %s "$GH_TOKEN"']);
  t.equal(r.code, 0, r.stderr);
  const shown = /^postern-(github-work|github-personal)-[0-9a-f]{16}$/.exec(r.stdout.toString());
  t.ok(shown, `GH_TOKEN is a placeholder: ${r.stdout.toString()}`);
  const used = shown![1]!;
  const left = used === 'github-work' ? 'github-personal' : 'github-work';
  t.equal(r.stdout.indexOf(secret), -1, 'no secret in the output');
  const warning = r.stderr.split('\n').find((l) => l.includes('GH_TOKEN'));
  t.ok(warning, `a line names GH_TOKEN: ${JSON.stringify(r.stderr)}`);
  t.match(warning ?? '', new RegExp(`\\b${used}\\b`), 'it names the credential GH_TOKEN stands for');
  t.match(warning ?? '', new RegExp(`\\b${left}\\b`), 'and the one left out');
});
