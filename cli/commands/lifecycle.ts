// unlock, lock, status, passwd, daemon.
import { Command } from 'commander';
import { Context } from '../context';
import { withAdmin } from '../admin-client';
import { getNewPassphrase, getPassphrase } from '../prompt';
import { describeError } from '../errors';
import { formatBytes, journalUsage } from './journal-usage';

type Ctx = () => Context;

// When an unlocked daemon will lock by itself (SPEC §3 auto_lock, unlock_max).
function lockDeadlines(s: Record<string, unknown>): string[] {
  const auto = s['auto_lock'] as { after: string; at: string } | null | undefined;
  const max = s['unlock_max'] as { after: string; at: string } | null | undefined;
  return [
    ...(auto ? [`auto-lock:    at ${auto.at} (after ${auto.after} without an agent request)`] : []),
    ...(max ? [`unlock max:   at ${max.at} (${max.after} after the unlock)`] : []),
  ];
}

export function register(program: Command, ctx: Ctx): void {
  program
    .command('daemon')
    .description('run the daemon in the foreground (starts locked)')
    .action(async () => {
      const c = ctx();
      // Loaded on demand: the daemon's modules are not needed by other commands.
      const { runDaemon } = require('../../daemon/main') as typeof import('../../daemon/main');
      await runDaemon({ configFlag: c.opts.config, env: c.env });
    });

  program
    .command('unlock')
    .description('send the passphrase to the daemon, which opens the vault')
    .option('--passphrase-file <file>', 'read the passphrase from a file (- for stdin)')
    .option('--accept-rollback', 'accept a vault or journal that rollback detection refused (recorded in the journal)')
    .action(async (o: { passphraseFile?: string; acceptRollback?: boolean }) => {
      const c = ctx();
      c.harden('unlock');
      const config = c.config();
      await withAdmin(config, async (a) => {
        // Check the daemon answers before asking the human anything.
        const st = await a.request('status');
        if (st['locked'] === false) {
          c.out({ locked: false, already_unlocked: true }, 'already unlocked');
          return;
        }
        const pass = await getPassphrase(o);
        try {
          const r = await a.request('unlock', { accept_rollback: Boolean(o.acceptRollback) }, [pass]);
          c.out({ locked: false, ...r }, 'unlocked');
        } finally {
          pass.fill(0);
        }
      });
    });

  program
    .command('lock')
    .description('wipe keys from the daemon, end all sessions and pending approvals')
    .action(async () => {
      const c = ctx();
      const r = await withAdmin(c.configToStop(), (a) => a.request('lock'));
      c.out({ locked: true, ...r }, r['was_locked'] ? 'already locked' : 'locked');
    });

  program
    .command('status')
    .description(
      'locked or not (and why), daemon pid, start time, config hash, journal size and growth, connected approvers, when the daemon will lock by itself (auto_lock, unlock_max), sessions, counters',
    )
    .action(async () => {
      const c = ctx();
      const config = c.configToStop();
      const s = await withAdmin(config, (a) => a.request('status'));
      const counters = s['counters'] as Record<string, number>;
      // The journal's size and growth, read from its files (SPEC §9).
      let journal: Record<string, unknown>;
      let journalLine: string;
      try {
        const u = journalUsage(config.paths.auditLog);
        journal = { path: config.paths.auditLog, ...u };
        journalLine = `${formatBytes(u.bytes)} in ${u.segments} segment file${u.segments === 1 ? '' : 's'}, +${formatBytes(u.last_hour_bytes)} in the last hour${u.younger_than_an_hour ? ' (all of it: the journal is younger than an hour)' : ''}`;
      } catch (e) {
        journal = { path: config.paths.auditLog, error: describeError(e) };
        journalLine = `not readable here: ${describeError(e)}`;
      }
      c.out({ ...s, journal }, [
        `state:        ${s['locked'] ? `locked (${String(s['lock_reason'])})` : 'unlocked'}`,
        `daemon pid:   ${String(s['pid'])}`,
        `started at:   ${String(s['started_at'])}`,
        `config:       ${String(s['config_path'])}`,
        `config hash:  ${String(s['config_hash'])}`,
        `audit head:   ${String(s['audit_head'])}`,
        `journal:      ${journalLine}`,
        ...(s['locked']
          ? []
          : [`credentials:  ${String(s['credentials'])}`, `vault gen.:   ${String(s['vault_generation'])}`]),
        ...lockDeadlines(s),
        `approvers:    ${String(s['approvers'])} connected`,
        `sessions:     ${(s['sessions'] as unknown[]).length}`,
        `pending:      ${(s['pending_approvals'] as unknown[]).length}`,
        `counters:     ${Object.entries(counters)
          .map(([k, v]) => `${k}=${v}`)
          .join(' ')}`,
      ]);
    });

  program
    .command('passwd')
    .description('change the vault passphrase')
    .option('--passphrase-file <file>', 'read the current passphrase from a file (- for stdin)')
    .option('--new-passphrase-file <file>', 'read the new passphrase from a file (- for stdin)')
    .action(async (o: { passphraseFile?: string; newPassphraseFile?: string }) => {
      const c = ctx();
      c.harden('passwd');
      await withAdmin(c.config(), async (a) => {
        await a.request('status');
        const pass = await getPassphrase(o, 'Current vault passphrase: ');
        const next = await getNewPassphrase(o.newPassphraseFile);
        try {
          const r = await a.request('passwd', {}, [pass, next]);
          c.out(r, 'passphrase changed');
        } finally {
          pass.fill(0);
          next.fill(0);
        }
      });
    });
}
