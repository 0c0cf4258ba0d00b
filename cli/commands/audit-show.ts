// `postern audit show`: decrypt and print journal entries, offline. The
// passphrase opens the vault for the audit box key, which opens each `key`
// entry's sealed key, which decrypts the events that follow it.
import { Command } from 'commander';
import { createReadStream, existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { Context } from '../context';
import { getPassphrase } from '../prompt';
import { Refusal } from '../../shared/errors';
import { UsageError } from '../errors';

type Ctx = () => Context;

async function* lines(path: string): AsyncGenerator<string> {
  const rl = createInterface({ input: createReadStream(path, { encoding: 'utf8' }), crlfDelay: Infinity });
  for await (const line of rl) yield line;
}

export function register(program: Command, ctx: Ctx): void {
  const audit = program.commands.find((c) => c.name() === 'audit') ?? program.command('audit').description('the audit journal');
  audit
    .command('show')
    .description('decrypt and print journal entries (needs the passphrase; no daemon)')
    .option('--log <file>', 'the journal (first segment); default: the config\'s audit_log')
    .option('--since <seq>', 'start at this entry number')
    .option('--passphrase-file <file>', 'read the passphrase from a file (- for stdin)')
    .option('--json', 'one JSON object per entry')
    .action(async (o: { log?: string; since?: string; passphraseFile?: string; json?: boolean }) => {
      const c = ctx();
      c.harden('audit show');
      const since = o.since === undefined ? 1 : Number(o.since);
      if (!Number.isSafeInteger(since) || since < 1) throw new UsageError('--since must be an entry number (1 or more)');
      const config = c.config();
      const journalPath = o.log ?? config.paths.auditLog;
      if (!existsSync(journalPath)) throw new Refusal('not_found', `no journal at ${journalPath}; pass --log`);
      const { openVaultFile } = require('../../shared/vault-format') as typeof import('../../shared/vault-format');
      const { readMeta } = require('../../shared/vault-meta') as typeof import('../../shared/vault-meta');
      const { openSealed, wipe } = require('../../shared/crypto') as typeof import('../../shared/crypto');
      const fmt = require('../../shared/audit-format') as typeof import('../../shared/audit-format');
      const pass = await getPassphrase(o);
      let boxSecret: Buffer;
      let boxPublic: Buffer;
      try {
        const opened = await openVaultFile(config.paths.vault, pass);
        const meta = readMeta(opened.contents);
        boxSecret = Buffer.from(opened.contents.blobs[meta.audit.box_secret] as Buffer);
        boxPublic = Buffer.from(meta.audit.box_public, 'base64');
        for (const b of opened.contents.blobs) wipe(b);
        wipe(opened.key);
      } finally {
        pass.fill(0);
      }
      const keys = new Map<number, Buffer>();
      const json = Boolean(o.json || c.json);
      try {
        for (let n = 0; ; n++) {
          const path = fmt.segmentPath(journalPath, n);
          if (!existsSync(path)) break;
          for await (const line of lines(path)) {
            const d = fmt.decodeEntry(Buffer.from(line, 'utf8'));
            if (!d.ok) {
              process.stdout.write(json ? JSON.stringify({ undecodable: true, why: d.why }) + '\n' : `?      (undecodable line: ${d.why})\n`);
              continue;
            }
            const e = d.entry;
            if (e.type === 'key') {
              const k = openSealed(Buffer.from(e.sealed, 'base64'), boxPublic, boxSecret);
              if (k) keys.set(e.seq, k);
            }
            if (e.seq < since) continue;
            let shown: Record<string, unknown>;
            if (e.type === 'event') {
              const k = keys.get(e.key_id);
              const payload = k ? fmt.decryptEvent(k, e) : null;
              shown = { seq: e.seq, time: e.time, type: e.type, ...(payload ?? { undecryptable: true }) };
            } else {
              const { v: _v, prev: _p, ...rest } = e as unknown as Record<string, unknown>;
              shown = rest;
            }
            if (json) process.stdout.write(JSON.stringify(shown) + '\n');
            else {
              const { seq, time, type, ...fields } = shown;
              process.stdout.write(`${String(seq).padStart(6)} ${String(time)} ${String(type === 'event' ? fields['kind'] : type)} ${JSON.stringify(type === 'event' ? { ...fields, kind: undefined } : fields)}\n`);
            }
          }
        }
      } finally {
        wipe(boxSecret);
        for (const k of keys.values()) wipe(k);
      }
    });
}
