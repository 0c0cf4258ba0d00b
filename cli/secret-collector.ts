// What is typed or pasted at a hidden prompt, assembled byte by byte in one
// fixed buffer that is wiped: either one line (a passphrase, a token, a
// password) or a private key, which ends at its "-----END ... PRIVATE
// KEY-----" line. The input is never turned into a string.
import { Interrupted, UsageError } from './errors';
import { Refusal } from '../shared/errors';

export type AnswerShape = 'line' | 'private-key';

const CR = 0x0d;
const LF = 0x0a;
const ESC = 0x1b;
const CTRL_C = 0x03;
const CTRL_D = 0x04;
const CTRL_U = 0x15;
const BACKSPACE = [0x7f, 0x08];

// Terminals that had bracketed paste switched on wrap a paste in these; they
// are not part of the answer.
const PASTE_MARKERS = [Buffer.from('\x1b[200~', 'latin1'), Buffer.from('\x1b[201~', 'latin1')];
const END_PREFIX = Buffer.from('-----END ', 'latin1');
const END_SUFFIX = Buffer.from('PRIVATE KEY-----', 'latin1');

export class SecretCollector {
  private readonly buf: Buffer;
  private len = 0;
  private lineStart = 0;
  private afterCR = false;
  private held: number[] = [];
  private complete = false;
  // Past the limit, a key is still read to its END line (and dropped), so
  // the rest of the paste is not left for the shell.
  private over = false;
  private junkLine = false;

  // `tooLong` is the one-line refusal given when the answer passes `max` bytes.
  constructor(
    private readonly shape: AnswerShape,
    private readonly max: number,
    private readonly tooLong: string,
  ) {
    this.buf = Buffer.alloc(max);
  }

  get done(): boolean {
    return this.complete;
  }

  // A key past the limit, whose rest is being dropped.
  get overflowed(): boolean {
    return this.over;
  }

  tooLongError(): Refusal {
    return new Refusal('bad_request', this.tooLong);
  }

  // Takes a chunk of terminal input and wipes it. True once the answer is
  // complete; later bytes of the same chunk are dropped. Throws Interrupted
  // on Ctrl-C, UsageError on Ctrl-D before anything, Refusal past the size limit.
  feed(chunk: Buffer): boolean {
    try {
      for (const byte of chunk) {
        if (this.complete) break;
        this.take(byte);
      }
    } finally {
      chunk.fill(0);
    }
    return this.complete;
  }

  // The answer, in a buffer of its own; the collector is wiped.
  answer(): Buffer {
    const out = Buffer.alloc(this.len);
    this.buf.copy(out, 0, 0, this.len);
    this.wipe();
    return out;
  }

  wipe(): void {
    this.buf.fill(0);
    this.held.fill(0);
    this.held = [];
    this.len = 0;
    this.lineStart = 0;
  }

  private take(byte: number): void {
    if (this.afterCR) {
      this.afterCR = false;
      if (byte === LF) return; // CR LF is one line end
    }
    if (this.held.length > 0 || byte === ESC) {
      this.held.push(byte);
      const marker = PASTE_MARKERS.find((m) => this.held.every((b, i) => m[i] === b));
      if (marker && this.held.length === marker.length) this.held = [];
      if (marker) return;
      // Not a paste marker: what was held is ordinary input, then this byte.
      const held = this.held.slice(0, -1);
      this.held.fill(0);
      this.held = [];
      for (const b of held) this.store(b);
      this.take(byte);
      return;
    }
    if (byte === CTRL_C) throw new Interrupted();
    if (byte === CTRL_D) {
      if (this.over) throw this.tooLongError();
      if (this.len === 0) throw new UsageError('cancelled');
      this.complete = true;
      return;
    }
    if (byte === CR || byte === LF) {
      this.afterCR = byte === CR;
      this.endLine();
      return;
    }
    if (BACKSPACE.includes(byte)) return this.erase();
    if (byte === CTRL_U) return this.cut(this.lineStart);
    this.store(byte);
  }

  private store(byte: number): void {
    if (this.len >= this.max) {
      if (this.shape === 'line') throw this.tooLongError();
      // From here on only the current line is kept, to spot the END line.
      this.over = true;
      this.junkLine = this.len > this.lineStart;
      this.cut(0);
      this.lineStart = 0;
    }
    this.buf[this.len++] = byte;
  }

  private endLine(): void {
    if (this.shape === 'line') {
      this.complete = true;
      return;
    }
    if (this.over) {
      const isEnd = !this.junkLine && this.isEndLine(0, this.len);
      this.cut(0);
      this.junkLine = false;
      if (isEnd) throw this.tooLongError();
      return;
    }
    const isEnd = this.isEndLine(this.lineStart, this.len);
    this.store(LF);
    if (this.over) {
      // The limit was reached by this very line end.
      this.cut(0);
      this.junkLine = false;
      if (isEnd) throw this.tooLongError();
      return;
    }
    this.lineStart = this.len;
    if (isEnd) this.complete = true;
  }

  // One character back: a whole UTF-8 sequence, or (in a key) the line end.
  private erase(): void {
    if (this.len === 0) return;
    if (this.len === this.lineStart) {
      const end = this.len - 1; // the LF before this line
      let start = end;
      while (start > 0 && this.buf[start - 1] !== LF) start--;
      this.lineStart = start;
      this.cut(end);
      return;
    }
    let at = this.len - 1;
    while (at > this.lineStart && (this.buf[at]! & 0xc0) === 0x80) at--;
    this.cut(at);
  }

  private cut(at: number): void {
    this.buf.fill(0, at, this.len);
    this.len = at;
  }

  // "-----END <WORDS >PRIVATE KEY-----", spaces and tabs around allowed.
  private isEndLine(start: number, end: number): boolean {
    const blank = (b: number | undefined): boolean => b === 0x20 || b === 0x09;
    while (start < end && blank(this.buf[start])) start++;
    while (end > start && blank(this.buf[end - 1])) end--;
    if (end - start < END_PREFIX.length + END_SUFFIX.length) return false;
    if (!this.buf.subarray(start, start + END_PREFIX.length).equals(END_PREFIX)) return false;
    if (!this.buf.subarray(end - END_SUFFIX.length, end).equals(END_SUFFIX)) return false;
    for (let i = start + END_PREFIX.length; i < end - END_SUFFIX.length; i++) {
      const b = this.buf[i]!;
      if (!(b === 0x20 || (b >= 0x41 && b <= 0x5a) || (b >= 0x30 && b <= 0x39))) return false;
    }
    return true;
  }
}
