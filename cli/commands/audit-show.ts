// `postern audit show`: decrypt and print journal entries, offline. The
// passphrase opens the vault for the audit box key, which opens each `key`
// entry's sealed key, which decrypts the events that follow it. The journal
// is read the way `audit verify` reads it (regular files only, bounded
// memory whatever a line holds); a line that is not an entry is printed as
// such and the listing goes on.
import { Command } from 'commander';
import { basename } from 'node:path';
import { Context } from '../context';
import { getPassphrase } from '../prompt';
import { Refusal } from '../../shared/errors';
import { UsageError } from '../errors';
import type { JournalLine } from '../../shared/audit-verify';
import { terminalJson } from '../approver/escape';

type Ctx = () => Context;

// An entry number as typed: decimal digits, no sign, no leading zero.
function parseSince(text: string | undefined): number {
  if (text === undefined) return 1;
  const n = /^[1-9][0-9]{0,15}$/.test(text) ? Number(text) : NaN;
  if (!Number.isSafeInteger(n))
    throw new UsageError(
      `--since must be an entry number (1 or more, decimal digits), not ${JSON.stringify(text.slice(0, 40))}`,
    );
  return n;
}

// stdout that ends the listing quietly when its reader goes away (`| head`):
// EPIPE is how a filter learns it has printed enough, so it is exit 0 like
// for any other filter; any other write error is a failure.
class Output {
  private gone = false;
  private failure: Refusal | null = null;

  constructor(private readonly stream: NodeJS.WriteStream) {
    stream.on('error', (e: NodeJS.ErrnoException) => this.failed(e));
  }

  get closed(): boolean {
    return this.gone;
  }

  // False once the reader is gone.
  async write(text: string): Promise<boolean> {
    if (!this.gone) {
      const more = this.stream.write(text);
      // A synchronous write error is known at once; its event comes later.
      const err = (this.stream as { errored?: Error | null }).errored;
      if (err) this.failed(err as NodeJS.ErrnoException);
      else if (!more) await this.drained();
    }
    if (this.failure) throw this.failure;
    return !this.gone;
  }

  // Everything written so far handed to the reader: the listing before a
  // failure is the reader's, and the failure's exit (process.exit) would
  // drop what a slow pipe still held.
  async flushed(): Promise<void> {
    if (this.gone) return;
    await new Promise<void>((resolve) => this.stream.write('', () => resolve()));
  }

  // After the last write: a write error reported late still fails the listing.
  async finish(): Promise<void> {
    if (!this.gone && this.stream.writableNeedDrain) await this.drained();
    if (this.failure) throw this.failure;
  }

  private failed(e: NodeJS.ErrnoException): void {
    if (this.gone) return;
    this.gone = true;
    if (e.code !== 'EPIPE')
      this.failure = new Refusal(
        'bad_environment',
        `cannot write the listing to stdout (${e.code ?? e.message}); check where the output goes`,
      );
  }

  private drained(): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        this.stream.off('drain', done);
        this.stream.off('close', done);
        resolve();
      };
      this.stream.on('drain', done);
      this.stream.on('close', done);
    });
  }
}

export function register(program: Command, ctx: Ctx): void {
  const audit =
    program.commands.find((c) => c.name() === 'audit') ?? program.command('audit').description('the audit journal');
  audit
    .command('show')
    .description('decrypt and print journal entries (needs the passphrase; no daemon)')
    .option('--log <file>', "the journal: segment 0 or its directory (default: the config's daemon.audit_log)")
    .option('--since <seq>', 'start at this entry number')
    .option('--passphrase-file <file>', 'read the passphrase from a file (- for stdin)')
    .option('--json', 'one JSON object per entry')
    .action(async (o: { log?: string; since?: string; passphraseFile?: string; json?: boolean }) => {
      const c = ctx();
      c.harden('audit show');
      const since = parseSince(o.since);
      const config = c.config();
      const { journalLines } = require('../../shared/audit-verify') as typeof import('../../shared/audit-verify');
      // The first line is read before the passphrase is asked: a wrong --log fails at once.
      const lines = journalLines(o.log ?? config.paths.auditLog);
      const first = await lines.next();
      const { openVaultFile } = require('../../shared/vault-format') as typeof import('../../shared/vault-format');
      const { readMeta } = require('../../shared/vault-meta') as typeof import('../../shared/vault-meta');
      const { openSealed, wipe } = require('../../shared/crypto') as typeof import('../../shared/crypto');
      const fmt = require('../../shared/audit-format') as typeof import('../../shared/audit-format');
      let boxSecret: Buffer;
      let boxPublic: Buffer;
      try {
        const pass = await getPassphrase(o);
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
      } catch (e) {
        await lines.return(undefined);
        throw e;
      }
      const keys = new Map<number, Buffer>();
      const json = Boolean(o.json || c.json);
      const out = new Output(process.stdout);
      let lastSeq = 0; // the last entry that decoded: a line that does not is shown when its place is

      // A line that is not an entry is shown where it stands, with why.
      const notEntry = (l: JournalLine, why: string): string => {
        const file = basename(l.file);
        return json
          ? JSON.stringify({ undecodable: true, file, line: l.line, why })
          : `?      (${file} line ${l.line} is not an entry: ${why})`;
      };

      const show = (l: JournalLine): string | null => {
        const d = l.bytes !== null && l.terminated ? fmt.decodeEntry(l.bytes) : null;
        if (!d || !d.ok) {
          if (lastSeq + 1 < since) return null;
          const why = d
            ? d.why
            : l.bytes === null
              ? `the line is longer than ${fmt.MAX_LINE_BYTES} bytes`
              : 'an incomplete last line (a write cut short)';
          return notEntry(l, why);
        }
        const e = d.entry;
        lastSeq = e.seq;
        if (e.type === 'key') {
          const k = openSealed(Buffer.from(e.sealed, 'base64'), boxPublic, boxSecret);
          if (k) keys.set(e.seq, k);
        }
        if (e.seq < since) return null;
        let shown: Record<string, unknown>;
        if (e.type === 'event') {
          const k = keys.get(e.key_id);
          const payload = k ? fmt.decryptEvent(k, e) : null;
          shown = { seq: e.seq, time: e.time, type: e.type, ...(payload ?? { undecryptable: true }) };
        } else {
          const { v: _v, prev: _p, ...rest } = e as unknown as Record<string, unknown>;
          shown = rest;
        }
        // What agents and upstreams wrote is in these values: never raw to a terminal.
        if (json) return terminalJson(shown);
        const { seq, time, type, ...fields } = shown;
        return `${String(seq).padStart(6)} ${String(time)} ${String(type === 'event' ? fields['kind'] : type)} ${terminalJson(type === 'event' ? { ...fields, kind: undefined } : fields)}`;
      };

      try {
        let next = first;
        while (!next.done && !out.closed) {
          const text = show(next.value);
          if (text !== null && !(await out.write(text + '\n'))) break;
          next = await lines.next();
        }
        await out.finish();
      } catch (e) {
        await out.flushed();
        throw e;
      } finally {
        await lines.return(undefined);
        wipe(boxSecret);
        for (const k of keys.values()) wipe(k);
      }
    });
}
