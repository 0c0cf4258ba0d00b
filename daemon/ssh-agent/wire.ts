// The SSH wire encoding (RFC 4251 §5) as the ssh-agent protocol uses it:
// reading fields from a message without ever reading past its end, writing
// them, and cutting a byte stream into uint32-length-prefixed messages.

// OpenSSH's agent refuses any message longer than this (AGENT_MAX_LEN).
export const MAX_MESSAGE = 256 * 1024;

// A message that is not well formed: the message names the field.
export class WireError extends Error {
  constructor(
    message: string,
    // Messages whole before the bad frame, in the same chunk: answered
    // before the connection closes.
    readonly before: Buffer[] = [],
  ) {
    super(message);
    this.name = 'WireError';
  }
}

// Chunks shorter than this are gathered (FrameSplitter).
const SMALL = 4096;

const utf8 = new TextDecoder('utf-8', { fatal: true });

export class WireReader {
  private offset = 0;

  constructor(private readonly buf: Buffer) {}

  get remaining(): number {
    return this.buf.length - this.offset;
  }

  private take(n: number, what: string): Buffer {
    if (n > this.remaining) {
      throw new WireError(`${what} needs ${n} bytes at offset ${this.offset}, only ${this.remaining} remain`);
    }
    const out = this.buf.subarray(this.offset, this.offset + n);
    this.offset += n;
    return out;
  }

  byte(what = 'byte'): number {
    return this.take(1, what)[0] as number;
  }

  uint32(what = 'uint32'): number {
    return this.take(4, what).readUInt32BE(0);
  }

  // RFC 4251 lets a reader take any non-zero byte as true; nothing in the
  // agent protocol sends anything but 0 or 1, so anything else is malformed.
  bool(what = 'boolean'): boolean {
    const at = this.offset;
    const b = this.byte(what);
    if (b > 1) throw new WireError(`${what} at offset ${at} is ${b}, not 0 or 1`);
    return b === 1;
  }

  // A view of the message's own memory, not a copy.
  string(what = 'string'): Buffer {
    const n = this.uint32(`length of ${what}`);
    return this.take(n, what);
  }

  // A non-negative mpint (RFC 4251 §5) as its big-endian magnitude, leading
  // zero bytes removed (OpenSSH accepts and trims them too).
  mpint(what = 'mpint'): Buffer {
    const at = this.offset;
    const b = this.string(what);
    if (b.length > 0 && ((b[0] as number) & 0x80) !== 0) throw new WireError(`${what} at offset ${at} is negative`);
    let i = 0;
    while (i < b.length && b[i] === 0) i += 1;
    return b.subarray(i);
  }

  // A name or other text: valid UTF-8 without NUL (OpenSSH reads these as C
  // strings and refuses an embedded NUL).
  text(what = 'text'): string {
    const at = this.offset;
    const b = this.string(what);
    if (b.includes(0)) throw new WireError(`${what} at offset ${at} contains a NUL byte`);
    try {
      return utf8.decode(b);
    } catch {
      throw new WireError(`${what} at offset ${at} is not valid UTF-8`);
    }
  }

  end(what = 'message'): void {
    if (this.remaining !== 0) {
      throw new WireError(`${what} has ${this.remaining} unexpected bytes after offset ${this.offset}`);
    }
  }
}

export function u8(n: number): Buffer {
  return Buffer.from([n]);
}

export function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
}

// A string field; text is written as UTF-8.
export function str(b: Buffer | string): Buffer {
  const body = typeof b === 'string' ? Buffer.from(b, 'utf8') : b;
  return Buffer.concat([u32(body.length), body]);
}

// One whole agent message: uint32 length, the type byte, the fields.
export function message(type: number, ...parts: Buffer[]): Buffer {
  const body = Buffer.concat([u8(type), ...parts]);
  return Buffer.concat([u32(body.length), body]);
}

// Cuts a stream into message bodies (type byte first), whatever the chunks:
// a message split across many, or many in one. After a WireError the stream
// cannot be resynchronised; the caller closes the connection.
export class FrameSplitter {
  // Chunks of the message not yet whole, joined only once it is (joining at
  // every chunk would cost the square of the message's length to a client
  // that sends a byte at a time). Small chunks are gathered into buffers of
  // SMALL bytes first: one Buffer per chunk cost about fifty times the
  // bytes held to a client that sends them one at a time.
  private parts: Buffer[] = [];
  private held = 0;
  // The buffer small chunks are copied into, and how much of it is used;
  // its used part is the last of `parts`.
  private small: Buffer | null = null;
  private smallUsed = 0;

  // The messages made whole by `chunk`. A frame that cannot be a message
  // throws a WireError carrying those whole before it (`before`).
  push(chunk: Buffer): Buffer[] {
    this.add(chunk);
    const bodies: Buffer[] = [];
    while (this.held >= 4) {
      const head = this.peekHead();
      const n = head.readUInt32BE(0);
      if (n === 0) throw new WireError('message length is 0; a message has at least its type byte', bodies);
      if (n > MAX_MESSAGE)
        throw new WireError(`message length ${n} is more than the limit of ${MAX_MESSAGE} bytes`, bodies);
      if (this.held < 4 + n) break;
      const all = this.parts.length === 1 ? (this.parts[0] as Buffer) : Buffer.concat(this.parts, this.held);
      // A copy: the body outlives the chunk it came in.
      bodies.push(Buffer.from(all.subarray(4, 4 + n)));
      const rest = all.subarray(4 + n);
      this.parts = rest.length > 0 ? [rest] : [];
      this.held = rest.length;
      this.small = null;
    }
    return bodies;
  }

  private add(chunk: Buffer): void {
    this.held += chunk.length;
    if (chunk.length >= SMALL) {
      this.parts.push(chunk);
      this.small = null;
      return;
    }
    if (this.small === null || this.smallUsed + chunk.length > SMALL) {
      this.small = Buffer.allocUnsafe(SMALL);
      this.smallUsed = 0;
      this.parts.push(this.small.subarray(0, 0));
    }
    chunk.copy(this.small, this.smallUsed);
    this.smallUsed += chunk.length;
    this.parts[this.parts.length - 1] = this.small.subarray(0, this.smallUsed);
  }

  // The first four bytes held, joined only when the first chunk is shorter.
  private peekHead(): Buffer {
    const first = this.parts[0] as Buffer;
    if (first.length >= 4) return first;
    const head = Buffer.concat(this.parts, this.held);
    this.parts = [head];
    this.small = null;
    return head;
  }

  // Bytes of an incomplete message held back so far.
  get buffered(): number {
    return this.held;
  }
}
