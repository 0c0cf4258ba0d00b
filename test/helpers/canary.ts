// Secret canaries: a unique secret, and every form of it worth searching for
// in bytes postern emits.
import { assertEventShapes } from './event-shape';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, lstatSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { cliAsync } from './postern';
import { base32 } from './exposure';

export function makeCanary(prefix = 'CANARY'): string {
  return `${prefix}_${randomBytes(18).toString('hex')}`;
}

// Substrings that any raw, hex, base64, base64url, base32 (either case) or
// UTF-16 (either byte order) encoding of the secret must contain, whatever
// its alignment in the encoded data: for each offset 0..2 the base64 of the
// secret from that offset, less the last quantum (which depends on what
// follows), and likewise for base32 at offsets 0..4. The UTF-16 forms are
// byte strings (latin1), as the text searched is.
export function canaryForms(secret: string): string[] {
  const b = Buffer.from(secret, 'utf8');
  const forms = new Set<string>([
    secret,
    b.toString('hex'),
    b.toString('hex').toUpperCase(),
    encodeURIComponent(secret),
  ]);
  for (let o = 0; o < 3; o++) {
    const std = b.subarray(o).toString('base64');
    const stable = std.slice(0, Math.floor((b.length - o) / 3) * 4 - 4);
    if (stable.length >= 16) {
      forms.add(stable);
      forms.add(stable.replace(/\+/g, '-').replace(/\//g, '_'));
    }
  }
  for (let o = 0; o < 5; o++) {
    const stable = base32(b.subarray(o)).slice(0, Math.floor((b.length - o) / 5) * 8 - 8);
    if (stable.length >= 16) {
      forms.add(stable);
      forms.add(stable.toLowerCase());
    }
  }
  const utf16 = Buffer.from(secret, 'utf16le');
  forms.add(utf16.toString('latin1'));
  forms.add(Buffer.from(utf16).swap16().toString('latin1'));
  return [...forms];
}

export function findCanary(text: string | Buffer, secret: string): string[] {
  const hay = typeof text === 'string' ? text : text.toString('latin1');
  return canaryForms(secret).filter((f) => hay.includes(f));
}

// Every regular file under dir, except the names in `skip`.
export function filesUnder(dir: string, skip: (path: string) => boolean = () => false): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir)) {
    const p = join(dir, e);
    const st = lstatSync(p);
    if (st.isDirectory()) out.push(...filesUnder(p, skip));
    else if (st.isFile() && !skip(p)) out.push(p);
  }
  return out;
}

export function readAll(path: string): Buffer {
  return readFileSync(path);
}

// The raw bytes of every journal segment (`audit.log`, `audit.log.1`, …):
// this covers the fields kept in clear, never an event's payload, which is
// encrypted.
export function journalBytes(home: string): Buffer {
  const parts: Buffer[] = [];
  for (let n = 0; ; n++) {
    const p = join(home, n === 0 ? 'audit.log' : `audit.log.${n}`);
    if (!existsSync(p)) break;
    parts.push(readFileSync(p));
  }
  return Buffer.concat(parts);
}

// Every journal entry decrypted (`postern audit show --json`, one JSON
// object a line): a secret written into an event payload shows only here.
// Fails rather than search less: an entry that does not decode or decrypt,
// or a journal without a single event, would hide what it holds.
export async function journalText(
  h: { env: NodeJS.ProcessEnv; passFile: string },
  passFile = h.passFile,
): Promise<string> {
  const r = await cliAsync(h, ['audit', 'show', '--json', '--passphrase-file', passFile]);
  if (r.code !== 0) throw new Error(`audit show exited ${r.code}: ${r.stderr}`);
  const entries = r.stdout
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
  const unread = entries.filter((e) => e['undecodable'] === true || e['undecryptable'] === true);
  if (unread.length > 0)
    throw new Error(`audit show could not read ${unread.length} entries: ${JSON.stringify(unread[0])}`);
  if (!entries.some((e) => e['type'] === 'event')) throw new Error('the journal holds no event to search');
  assertEventShapes(entries);
  return r.stdout;
}

// The journal's entries (journalText) once `enough` holds of them, or as
// they are after `ms`: for events written a moment after what the test saw
// (a tunnel is journaled when it closes).
export async function journalEntriesWhen(
  h: { env: NodeJS.ProcessEnv; passFile: string },
  enough: (entries: Record<string, unknown>[]) => boolean,
  ms = 10_000,
): Promise<Record<string, unknown>[]> {
  const deadline = Date.now() + ms;
  for (;;) {
    const entries = (await journalText(h))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    if (enough(entries) || Date.now() >= deadline) return entries;
    await new Promise((r) => setTimeout(r, 200));
  }
}
