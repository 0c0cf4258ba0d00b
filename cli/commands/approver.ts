// postern approver: the human's side of SPEC §7. Authenticates once with
// the passphrase (approving widens authority), then shows each pending
// request as a card and sends the decision; or, with --auto, answers every
// request with a fixed policy (scripted set-ups and tests; still
// authenticated).
import { Command } from 'commander';
import { Context } from '../context';
import { UsageError } from '../errors';
import { getPassphrase } from '../prompt';
import { DaemonSource } from '../approver/session';
import { runAuto, runInteractive } from '../approver/run';
import type { AutoMode } from '../approver/keys';

type Ctx = () => Context;

interface ApproverFlags {
  auto?: string;
  rootDepth?: string;
  passphraseFile?: string;
}

const AUTO_MODES: readonly AutoMode[] = ['approve', 'deny'];
export const MAX_ROOT_DEPTH = 64;

interface Plan {
  auto: AutoMode | null;
  rootDepth: number;
}

function plan(o: ApproverFlags): Plan {
  if (o.auto !== undefined && !AUTO_MODES.includes(o.auto as AutoMode)) {
    throw new UsageError(`--auto takes approve or deny, not ${JSON.stringify(o.auto)}`);
  }
  const auto = (o.auto as AutoMode | undefined) ?? null;
  let rootDepth = 0;
  if (o.rootDepth !== undefined) {
    if (auto !== 'approve')
      throw new UsageError(
        '--root-depth only applies with --auto approve; in the terminal, pick the root with the keys 1…9',
      );
    if (!/^\d{1,2}$/.test(o.rootDepth) || Number(o.rootDepth) > MAX_ROOT_DEPTH) {
      throw new UsageError(
        `--root-depth takes a number from 0 (the requesting process) to ${MAX_ROOT_DEPTH}, not ${JSON.stringify(o.rootDepth)}`,
      );
    }
    rootDepth = Number(o.rootDepth);
  }
  if (auto === null) {
    if (!process.stdin.isTTY)
      throw new UsageError(
        'the interactive approver reads key presses from a terminal, and stdin is not one; run it in a terminal, or use --auto approve|deny',
      );
    if (o.passphraseFile === '-')
      throw new UsageError(
        'the interactive approver reads key presses from stdin; give --passphrase-file a file, not -',
      );
  }
  return { auto, rootDepth };
}

function describeAuto(p: Plan): string {
  if (p.auto === 'deny') return 'denying every request';
  const root =
    p.rootDepth === 0
      ? 'the requesting process'
      : `ancestor ${p.rootDepth} of the requester (or the highest one there is)`;
  return `approving every request: a session rooted at ${root}, or once for each-use credentials`;
}

async function runApprover(c: Context, o: ApproverFlags): Promise<void> {
  c.harden('approver');
  const p = plan(o);
  const config = c.config();
  // Reachable before the human is asked anything (exit 3 otherwise).
  const source = await DaemonSource.connect(config);
  const stop = new AbortController();
  const onSignal = (): void => stop.abort();
  const signals: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];
  try {
    const pass = await getPassphrase(o);
    // Proving it can take a few seconds (the daemon derives the key when locked).
    if (p.auto === null) process.stdout.write('checking the passphrase with the daemon…\n');
    const attached = await source.attach(pass);
    for (const s of signals) process.on(s, onSignal);
    const id = String(attached['approver'] ?? '');
    if (p.auto === null) {
      const out = process.stdout;
      const terminal = {
        input: process.stdin,
        write: (text: string) => void out.write(text),
        size: () => (out.isTTY ? { rows: out.rows, columns: out.columns } : undefined),
        onResize: (redraw: () => void) => {
          out.on('resize', redraw);
          return () => void out.removeListener('resize', redraw);
        },
      };
      await runInteractive(source, terminal, stop.signal, { approverId: id });
      return;
    }
    const print = (line: string): void => void process.stdout.write(`${line}\n`);
    const what = describeAuto(p);
    print(
      c.json
        ? JSON.stringify({ event: 'attached', approver: id, pending: attached['pending'] ?? 0, policy: what })
        : `attached as approver ${id}; ${what}`,
    );
    await runAuto(source, { mode: p.auto, rootDepth: p.rootDepth, json: c.json, print }, stop.signal);
    print(c.json ? JSON.stringify({ event: 'stopped' }) : 'approver stopped');
  } finally {
    for (const s of signals) process.removeListener(s, onSignal);
    // Wipes the passphrase kept for re-attaching.
    source.close();
  }
}

export function register(program: Command, ctx: Ctx): void {
  program
    .command('approver')
    .description('terminal approver: authenticate once with the passphrase, then decide each pending request')
    .option('--auto <mode>', 'answer every request at once: approve or deny (scripted set-ups and tests)')
    .option(
      '--root-depth <n>',
      'with --auto approve: root sessions at ancestor N of the requester (0, the default: the requester itself)',
    )
    .option('--passphrase-file <file>', 'read the passphrase from a file (- for stdin, --auto only)')
    .action(async (o: ApproverFlags) => {
      await runApprover(ctx(), o);
    });
}
