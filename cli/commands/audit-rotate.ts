// audit rotate-key: a new audit signing key, through the daemon (which
// holds the journal and the current key). The old key vouches for the new
// one in the journal; auditors pin the new key from now on.
import { Command } from 'commander';
import { Context } from '../context';
import { withAdmin } from '../admin-client';
import { getPassphrase } from '../prompt';

type Ctx = () => Context;

export function register(program: Command, ctx: Ctx): void {
  const audit =
    program.commands.find((c) => c.name() === 'audit') ?? program.command('audit').description('the audit journal');
  audit
    .command('rotate-key')
    .description(
      'replace the audit signing key (the daemon must be unlocked); prints the new public key to pin with `audit verify --pubkey`',
    )
    .option('--passphrase-file <file>', 'read the passphrase from a file (- for stdin)')
    .action(async (o: { passphraseFile?: string }) => {
      const c = ctx();
      c.harden('audit rotate-key');
      await withAdmin(c.config(), async (a) => {
        await a.request('status');
        const pass = await getPassphrase(o);
        try {
          const r = await a.request('audit.rotate_key', {}, [pass]);
          c.out(r, [
            `audit signing key rotated at entry ${String(r['signer_seq'])}, vouched for by the previous key (${String(r['previous_audit_public_key'])})`,
            `new audit public key: ${String(r['audit_public_key'])}`,
            'pin it from now on: postern audit verify --pubkey <new key>; keep the previous key with your records',
          ]);
        } finally {
          pass.fill(0);
        }
      });
    });
}
