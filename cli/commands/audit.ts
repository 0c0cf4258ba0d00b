// audit verify | head: offline checks of the audit journal (SPEC §5, §9).
// No daemon, no passphrase, no hardening: only public data is read.
import { Command } from 'commander';
import { Context } from '../context';
import { UsageError } from '../errors';
import type { VerifyReport } from '../../shared/audit-verify';

type Ctx = () => Context;

interface VerifyFlags {
  log?: string;
  pubkey?: string;
  expectHead?: string;
  allowUnsignedTail?: boolean;
}

function journalPath(c: Context, log: string | undefined): string {
  return log ?? c.config().paths.auditLog;
}

function reportLines(journal: string, r: VerifyReport, pubkey: string | undefined): string[] {
  const lines = [
    `journal: ${journal} (${r.segments} segment file${r.segments === 1 ? '' : 's'})`,
    `entries checked: ${r.entries}`,
    `checkpoints: ${r.checkpoints}${r.signedThrough === null ? ' (none valid)' : ` (signed through entry ${r.signedThrough})`}; unsigned tail: ${r.unsignedTail}`,
    `head: ${r.head ? `${r.head.seq}:${r.head.hash}` : 'none'}`,
    r.keyPinned
      ? `key: pinned (${pubkey})`
      : "key: not pinned (checked against the journal's own genesis key; pass --pubkey with the key `postern init` printed to pin it)",
  ];
  // After a key rotation, every key and the entry it took over from.
  if (r.signingKeys.length > 1)
    lines.push(`signing keys: ${r.signingKeys.map((k) => `${k.key} (from entry ${k.since})`).join(', ')}`);
  const p = r.problem;
  if (p)
    lines.push(
      `problem: ${p.seq === null ? 'no entry number' : `entry ${p.seq}`}: ${p.kind} (${p.file}${p.line > 0 ? ` line ${p.line}` : ''}): ${p.message}`,
    );
  lines.push(r.ok ? 'result: ok' : 'result: FAILED');
  return lines;
}

export function register(program: Command, ctx: Ctx): void {
  const audit = program.command('audit').description('check the audit journal offline (verify, head)');

  audit
    .command('verify')
    .description(
      'offline: check the hash chain, checkpoint signatures, signing key and head of the journal; no daemon, no passphrase',
    )
    .option('--log <file>', "the journal: segment 0 or its directory (default: the config's daemon.audit_log)")
    .option('--pubkey <key>', 'pin the audit public key `postern init` printed (base64)')
    .option(
      '--expect-head <seq:hash>',
      'a head noted earlier with `postern audit head`; the journal must still contain it',
    )
    .option('--allow-unsigned-tail', 'accept entries after the last checkpoint (reported, not an error)')
    .action(async (o: VerifyFlags) => {
      const c = ctx();
      const { parseHead } = require('../../shared/audit-format') as typeof import('../../shared/audit-format');
      const { parsePubkey, verifyJournal } =
        require('../../shared/audit-verify') as typeof import('../../shared/audit-verify');
      let expectHead: { seq: number; hash: string } | undefined;
      if (o.expectHead !== undefined) {
        const h = parseHead(o.expectHead);
        if (!h || h.seq < 1)
          throw new UsageError(
            `--expect-head must be SEQ:HASH as \`postern audit head\` prints it (a seq from 1 and 64 lower-case hex digits), not ${JSON.stringify(o.expectHead.slice(0, 80))}`,
          );
        expectHead = h;
      }
      if (o.pubkey !== undefined && !parsePubkey(o.pubkey)) {
        throw new UsageError(
          '--pubkey must be the audit public key `postern init` printed: 32 bytes in standard base64 (44 characters ending in =)',
        );
      }
      const journal = journalPath(c, o.log);
      const report = await verifyJournal(journal, {
        pubkey: o.pubkey,
        expectHead,
        allowUnsignedTail: Boolean(o.allowUnsignedTail),
      });
      c.out({ journal, ...report }, reportLines(journal, report, o.pubkey));
      if (!report.ok) {
        const p = report.problem;
        if (p)
          process.stderr.write(
            `postern: audit verification failed: ${p.kind}${p.seq === null ? '' : ` at entry ${p.seq}`}\n`,
          );
        process.exitCode = 1;
      }
    });

  audit
    .command('head')
    .description('print the journal head SEQ:HASH (its last complete entry), to keep where an agent cannot write')
    .option('--log <file>', "the journal: segment 0 or its directory (default: the config's daemon.audit_log)")
    .action(async (o: { log?: string }) => {
      const c = ctx();
      const { journalHead } = require('../../shared/audit-verify') as typeof import('../../shared/audit-verify');
      const journal = journalPath(c, o.log);
      const h = await journalHead(journal);
      c.out({ journal, seq: h.seq, hash: h.hash, head: `${h.seq}:${h.hash}`, file: h.file }, `${h.seq}:${h.hash}`);
    });
}
