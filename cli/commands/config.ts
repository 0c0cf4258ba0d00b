// config approve: show how the config on disk differs from the approved one,
// then record it after a passphrase proof.
import { Command } from 'commander';
import { Context } from '../context';
import { withAdmin } from '../admin-client';
import { getPassphrase } from '../prompt';
import type { ConfigChange } from '../../shared/config';
import { changeLines } from '../../shared/config-changes';

type Ctx = () => Context;

export function register(program: Command, ctx: Ctx): void {
  const config = program.command('config').description('the daemon config and its approval');
  config
    .command('approve')
    .description('show how the config differs from the approved one; approve it (passphrase)')
    .option('--passphrase-file <file>', 'read the passphrase from a file (- for stdin)')
    .action(async (o: { passphraseFile?: string }) => {
      const c = ctx();
      c.harden('config approve');
      await withAdmin(c.config(), async (a) => {
        const diff = await a.request('config.diff');
        const changes = diff['changes'] as ConfigChange[];
        // In the daemon's words, which are those of the file (changeLines).
        const lines = Array.isArray(diff['lines']) ? (diff['lines'] as string[]) : changeLines(changes);
        if (diff['approved'] === true) {
          c.out(
            { approved: true, changed: false, hash: diff['current_hash'] },
            `the config ${String(diff['config_path'])} is already approved`,
          );
          return;
        }
        c.info(
          `The config ${String(diff['config_path'])} differs from the approved one:\n${lines.map((l) => `  ${l}`).join('\n')}\n`,
        );
        const pass = await getPassphrase(o, 'Vault passphrase, to approve this config: ');
        try {
          const r = await a.request('config.approve', { hash: diff['current_hash'] }, [pass]);
          c.out({ approved: true, changed: true, changes, lines, ...r }, approvedText(r));
        } finally {
          pass.fill(0);
        }
      });
    });
}

// When the approved config applies, and what waits for a restart.
function approvedText(r: Record<string, unknown>): string {
  const waiting = Array.isArray(r['restart_required']) ? (r['restart_required'] as string[]) : [];
  const when = r['locked'] ? '; it applies at unlock: now run `postern unlock`' : '; it is in effect now';
  const later =
    waiting.length > 0
      ? `, except ${waiting.join(', ')}, which take${waiting.length === 1 ? 's' : ''} effect at the next start of the daemon`
      : '';
  return `config approved (${String(r['approved_hash'])})${when}${later}`;
}
