// postern sessions / sessions revoke ID|--all. Listing and ending authority
// never needs the passphrase (SPEC §1): only widening it does.
import { Command } from 'commander';
import { Context } from '../context';
import { withAdmin } from '../admin-client';
import { UsageError } from '../errors';
import { escapeText } from '../approver/escape';

type Ctx = () => Context;

interface SessionView {
  id?: unknown;
  credential?: unknown;
  root?: { pid?: unknown; exe?: unknown };
  created_at?: unknown;
  expires_at?: unknown;
}

// The root's executable path was chosen by whoever started that process:
// escaped like on an approval card.
function sessionLine(s: SessionView): string {
  const str = (v: unknown): string => escapeText(typeof v === 'string' ? v : String(v ?? '?'), 200);
  return `${str(s.id)}  ${str(s.credential)}  root pid ${str(s.root?.pid)} ${str(s.root?.exe)}  expires ${str(s.expires_at)}`;
}

export function register(program: Command, ctx: Ctx): void {
  const sessions = program
    .command('sessions')
    .description('list approved sessions (revoke: end them)')
    .action(async () => {
      const c = ctx();
      const r = await withAdmin(c.configToStop(), (a) => a.request('sessions.list'));
      const list = Array.isArray(r['sessions']) ? (r['sessions'] as SessionView[]) : [];
      c.out({ sessions: list }, list.length === 0 ? 'no sessions' : list.map(sessionLine));
    });

  sessions
    .command('revoke')
    .description('end one session (by ID) or all of them (--all)')
    .argument('[id]', 'the session to end, as `postern sessions` lists it')
    .option('--all', 'end every session')
    .action(async (id: string | undefined, o: { all?: boolean }) => {
      const c = ctx();
      if (o.all && id !== undefined) throw new UsageError('give a session ID or --all, not both');
      if (!o.all && id === undefined)
        throw new UsageError(
          'say which session to end: `postern sessions revoke ID` (see `postern sessions`), or --all',
        );
      const r = await withAdmin(c.configToStop(), (a) => a.request('sessions.revoke', o.all ? { all: true } : { id }));
      const n = typeof r['revoked'] === 'number' ? r['revoked'] : 0;
      c.out(
        { revoked: n },
        o.all ? `${n} session${n === 1 ? '' : 's'} ended` : `session ${escapeText(String(id), 80)} ended`,
      );
    });
}
