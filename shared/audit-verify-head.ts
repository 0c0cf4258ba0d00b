// `postern audit head`: the last complete entry of the last segment, read
// from the end of the file (no chain check: that is `audit verify`).
import { lstatSync } from 'node:fs';
import { MAX_LINE_BYTES, decodeEntry, entryHash, segmentPath, sodiumReady } from './audit-format';
import { notRegular, openToRead, resolveJournalPath } from './audit-verify-read';
import { Refusal } from './errors';
import { lastCompleteLine } from './journal-read';

export interface JournalHead {
  seq: number;
  hash: string;
  file: string;
}

export async function journalHead(path: string): Promise<JournalHead> {
  await sodiumReady();
  const base = resolveJournalPath(path);
  let last = -1;
  for (let n = 0; ; n++) {
    const file = segmentPath(base, n);
    let why: string | null;
    try {
      why = notRegular(lstatSync(file));
    } catch {
      break;
    }
    if (why)
      throw new Refusal('not_found', `${file} ${why}; give the journal file (segment 0, or its directory) with --log`);
    last = n;
  }
  if (last < 0)
    throw new Refusal(
      'not_found',
      `${base} does not exist; give the journal file (segment 0, or its directory) with --log`,
    );
  for (let n = last; n >= 0; n--) {
    const file = segmentPath(base, n);
    const line = await lastEntryLine(file, n === last);
    if (line === 'none') continue;
    if (line === 'unended')
      throw new Refusal(
        'not_found',
        `${file} ends in more than ${MAX_LINE_BYTES} bytes without a newline, longer than any journal entry; run \`postern audit verify --log ${base}\` to find the damage`,
      );
    const d = line === 'overlong' ? null : decodeEntry(line);
    if (!d || !d.ok) {
      throw new Refusal(
        'not_found',
        `the last complete line of ${file} is not a journal entry; run \`postern audit verify --log ${base}\` to find the damage`,
      );
    }
    return { seq: d.entry.seq, hash: entryHash(line as Buffer), file };
  }
  throw new Refusal('not_found', `${base} holds no complete entry; give the journal file with --log`);
}

// The line that should hold a segment's last entry: its last complete line,
// or, in the last segment, the one before it when that last line is a torn
// write (a line that is not an entry, ending the file). Part of a line at
// the end is skipped. 'none': no complete entry line in the file;
// 'unended': it ends in more bytes without a newline than any entry has.
async function lastEntryLine(file: string, isLast: boolean): Promise<Buffer | 'overlong' | 'none' | 'unended'> {
  // A FIFO or device would block or never end, a link could point anywhere: only regular files are read.
  const opened = await openToRead(file);
  if ('why' in opened)
    throw new Refusal(
      'not_found',
      `${file} ${opened.why}; give the journal file (segment 0, or its directory) with --log`,
    );
  const fh = opened.fh;
  try {
    const size = (await fh.stat()).size;
    const found = await lastCompleteLine(fh, size);
    if (!found) return 'none';
    if (found.line === 'overlong' && found.end === size) return 'unended';
    const torn = isLast && found.end === size - 1 && found.line !== 'overlong' && !decodeEntry(found.line).ok;
    if (!torn) return found.line;
    const before = await lastCompleteLine(fh, found.start);
    return before ? before.line : 'none';
  } finally {
    await fh.close();
  }
}
