// Framing of the admin protocol (CLI and approver ↔ daemon over admin.sock).
//
// A frame is: u32 LE total length (of what follows) | u32 LE JSON length |
// JSON (UTF-8) | zero or more attachments, each u32 LE length + raw bytes.
// Passphrases and secrets travel only as attachments, so neither side ever
// turns them into JavaScript strings (which cannot be wiped).
import { Refusal } from './errors';

export const MAX_FRAME = 1024 * 1024;

export interface Frame {
  json: Record<string, unknown>;
  attachments: Buffer[];
}

export function encodeFrame(json: Record<string, unknown>, attachments: readonly Buffer[] = []): Buffer {
  const body = Buffer.from(JSON.stringify(json), 'utf8');
  let total = 4 + body.length;
  for (const a of attachments) total += 4 + a.length;
  if (total > MAX_FRAME)
    throw new Refusal(
      'bad_request',
      `message too large (${total} bytes, at most ${MAX_FRAME}); use a smaller secret or definition`,
    );
  const out = Buffer.alloc(4 + total);
  let o = 0;
  out.writeUInt32LE(total, o);
  o += 4;
  out.writeUInt32LE(body.length, o);
  o += 4;
  body.copy(out, o);
  o += body.length;
  for (const a of attachments) {
    out.writeUInt32LE(a.length, o);
    o += 4;
    a.copy(out, o);
    o += a.length;
  }
  return out;
}

// Incremental decoder: feed it socket chunks, it yields whole frames. The
// buffered bytes are wiped as soon as a frame has been cut out of them.
export class FrameDecoder {
  private buf: Buffer = Buffer.alloc(0);

  push(chunk: Buffer): Frame[] {
    const joined = Buffer.concat([this.buf, chunk]);
    this.buf.fill(0);
    chunk.fill(0);
    this.buf = joined;
    const frames: Frame[] = [];
    for (;;) {
      if (this.buf.length < 4) break;
      const total = this.buf.readUInt32LE(0);
      if (total > MAX_FRAME || total < 4)
        throw new Refusal(
          'bad_request',
          `malformed admin frame (length ${total}); use the postern CLI to talk to admin.sock`,
        );
      if (this.buf.length < 4 + total) break;
      const frameBytes = this.buf.subarray(4, 4 + total);
      frames.push(decodeFrameBody(frameBytes));
      const rest = Buffer.from(this.buf.subarray(4 + total));
      this.buf.fill(0);
      this.buf = rest;
    }
    return frames;
  }

  wipe(): void {
    this.buf.fill(0);
    this.buf = Buffer.alloc(0);
  }
}

function decodeFrameBody(b: Buffer): Frame {
  const bad = (): never => {
    throw new Refusal('bad_request', 'malformed admin frame; use the postern CLI to talk to admin.sock');
  };
  if (b.length < 4) bad();
  const jl = b.readUInt32LE(0);
  if (4 + jl > b.length) bad();
  let json: unknown;
  try {
    json = JSON.parse(b.subarray(4, 4 + jl).toString('utf8'));
  } catch {
    bad();
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) bad();
  const attachments: Buffer[] = [];
  let o = 4 + jl;
  while (o < b.length) {
    if (o + 4 > b.length) bad();
    const l = b.readUInt32LE(o);
    o += 4;
    if (o + l > b.length) bad();
    attachments.push(Buffer.from(b.subarray(o, o + l)));
    o += l;
  }
  return { json: json as Record<string, unknown>, attachments };
}
