// `postern run [--credential NAME]... -- CMD [ARGS]` (SPEC §11): opens a run
// on the agent socket, listens on a loopback port as CMD's proxy, and starts
// CMD with the proxy, CA and placeholder variables; it exits with CMD's
// status. It holds no secret: placeholders stand for them, and the daemon
// identifies this process by the kernel like any agent.
import { Command } from 'commander';
import { join } from 'node:path';
import { Context } from '../context';
import { agentSocketPath } from '../agent-client';
import { openRun } from '../run/runs-call';
import { escapeText } from '../approver/escape';
import { newProxyToken } from '../run/proxy-token';
import { startRelay } from '../run/relay';
import { writeCaBundle } from '../run/ca-bundle';
import { childEnvironment } from '../run/child-env';
import { startCommand } from '../run/start-command';

type Ctx = () => Context;

function credentialList(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

async function run(c: Context, credentials: string[], argv: string[]): Promise<number> {
  const loaded = c.config(true);
  const socket = agentSocketPath(c.env, () => loaded.paths.agentSocket);
  const opened = await openRun(socket, credentials);
  // Said, not settled silently: the user may have meant the other one.
  for (const k of opened.conflicts)
    process.stderr.write(
      `postern: warning: ${escapeText(k.variable)} stands for credential ${escapeText(k.credential)}; ${k.ignored.map((n) => escapeText(n)).join(', ')} also name${k.ignored.length === 1 ? 's' : ''} it and get${k.ignored.length === 1 ? 's' : ''} no placeholder there; choose with --credential NAME\n`,
    );
  const caPem = join(loaded.home, 'ca.pem');
  const bundle = writeCaBundle(caPem, c.env);
  process.once('exit', () => bundle.remove());
  if (!bundle.withPosternCa)
    process.stderr.write(
      `postern: warning: ${caPem} is missing, so HTTPS through the proxy will fail certificate checks; run \`postern ca\` with the daemon unlocked to create it\n`,
    );
  const token = newProxyToken();
  let root: number | null = null;
  const relay = await startRelay({ agentSocket: socket, token, root: () => root });
  const env = childEnvironment({
    base: c.env,
    proxyUrl: `http://${token}:${token}@127.0.0.1:${relay.port}`,
    bundle: bundle.file,
    wgetrc: bundle.wgetrc,
    placeholders: opened.env,
    // The daemon's own word, since an agent's config may not be the daemon's.
    sshAgentSocket: opened.sshAgentSocket === undefined ? loaded.paths.sshAgentSocket : opened.sshAgentSocket,
  });
  try {
    const started = await startCommand(argv, env);
    root = started.child.pid ?? null;
    return await started.status;
  } finally {
    relay.close();
    bundle.remove();
  }
}

export function register(program: Command, ctx: Ctx): void {
  program
    .command('run')
    .usage('[--credential NAME]... -- CMD [ARGS...]')
    .description(
      "run a program with postern's credentials available through a local proxy (placeholders in its environment)",
    )
    .option(
      '--credential <name>',
      'a credential to make available (repeatable; default: every HTTP credential)',
      credentialList,
    )
    .argument('<cmd...>', 'the program and its arguments, after --')
    .action(async (argv: string[], o: { credential?: string[] }) => {
      process.exit(await run(ctx(), o.credential ?? [], argv));
    });
}
