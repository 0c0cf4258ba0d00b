// The variables a credential's placeholder may not land in (SPEC §11; the
// rule of shared/credential/env-names.ts, which `postern run` checks again
// on the POST /v1/runs reply): those a program reads as a command to run or
// a place to load code or configuration from. GIT_SSH_COMMAND, GIT_ASKPASS,
// EDITOR and PAGER are refused; these rows hold the same rule for the
// variables of the same kind that git, less, man, sudo, npm, node, cargo
// and the JVM read. A placeholder is a bare word (`postern-<name>-<hex>`):
// as a command it is looked up on PATH, as a file it is opened in the
// current directory, so whoever can write a file of that name there gets it
// run. A reply naming one of them starts nothing (exit 3, one line).
import t from 'tap';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { cleanEnv, makeHome } from '../helpers/postern';
import { cliBytes } from '../helpers/cli-bytes';
import { startRunsPeer } from '../helpers/runs-peer';

const PLACEHOLDER = 'postern-github-0123456789abcdef';

// Each name, with what reads it as a command or a code/config location.
const COMMAND_VARIABLES: [string, string][] = [
  ['GIT_PAGER', 'git runs it as the pager'],
  ['GIT_EDITOR', 'git runs it as the editor'],
  ['GIT_SEQUENCE_EDITOR', 'git rebase -i runs it'],
  ['GIT_EXTERNAL_DIFF', 'git diff runs it'],
  ['MANPAGER', 'man runs it'],
  ['LESSOPEN', 'less runs it as an input filter'],
  ['BROWSER', 'xdg-open, gh and python webbrowser run it'],
  ['SUDO_ASKPASS', 'sudo -A runs it'],
  ['RUSTC_WRAPPER', 'cargo runs it in front of rustc'],
  ['NPM_CONFIG_USERCONFIG', 'npm reads it as its config file (which names scripts, a shell, a registry)'],
  ['NODE_REPL_EXTERNAL_MODULE', 'node loads it as a module instead of its REPL'],
  ['JAVA_TOOL_OPTIONS', 'every JVM reads it as command-line options (-javaagent loads code)'],
];

t.test('a /v1/runs reply that puts a placeholder in a command variable starts nothing', async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  const marker = join(h.dir, 'started');
  for (const [name, why] of COMMAND_VARIABLES) {
    const peer = await startRunsPeer({ env: { [name]: PLACEHOLDER } });
    const r = await cliBytes(cleanEnv({ POSTERN_HOME: h.home, POSTERN_AGENT_SOCKET: peer.socket }), [
      'run',
      '--',
      'touch',
      marker,
    ]);
    await peer.close();
    t.equal(r.code, 3, `${name}: ${why}`);
    t.match(
      r.stderr,
      /^postern: the agent socket .* answered POST \/v1\/runs without a usable env entry .*postern's daemon\?\n$/,
      name,
    );
    t.notOk(existsSync(marker), `${name}: CMD did not start`);
  }
});
