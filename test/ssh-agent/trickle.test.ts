// One message of almost 256 KiB sent a byte at a time: what the daemon
// holds of an incomplete message must cost in proportion to its size, not
// its square (joining everything that came before at every chunk), or a
// client trickling bytes keeps the daemon's one thread busy (SPEC §1:
// flooding costs the flooder). Counted in bytes copied, not in time: the
// splitter's copies go through Buffer.concat and Buffer.from.
import t from 'tap';
import { FrameSplitter, MAX_MESSAGE } from '../../daemon/ssh-agent/wire';

// Bytes copied by Buffer.concat and Buffer.from(buffer) while `work` runs.
function bytesCopied(work: () => void): number {
  const concat = Buffer.concat;
  const from = Buffer.from;
  let copied = 0;
  Buffer.concat = ((list: readonly Uint8Array[], total?: number) => {
    const out = concat(list, total);
    copied += out.length;
    return out;
  }) as typeof Buffer.concat;
  Buffer.from = ((value: unknown, ...rest: unknown[]) => {
    const out = (from as (...a: unknown[]) => Buffer)(value, ...rest);
    if (value instanceof Uint8Array) copied += out.length;
    return out;
  }) as typeof Buffer.from;
  try {
    work();
  } finally {
    Buffer.concat = concat;
    Buffer.from = from;
  }
  return copied;
}

function message(n: number, fill: number): Buffer {
  const msg = Buffer.alloc(4 + n, fill);
  msg.writeUInt32BE(n, 0);
  return msg;
}

for (const piece of [1, 3, 7, 4096]) {
  t.test(`a message of ${MAX_MESSAGE} bytes pushed ${piece} bytes at a time`, async (t) => {
    const msg = message(MAX_MESSAGE, 0x41);
    const next = message(5, 0x42);
    const stream = Buffer.concat([msg, next]);
    const f = new FrameSplitter();
    const bodies: Buffer[] = [];
    const copied = bytesCopied(() => {
      for (let at = 0; at < stream.length; at += piece) bodies.push(...f.push(stream.subarray(at, at + piece)));
    });
    t.equal(bodies.length, 2, 'both messages');
    t.ok(bodies[0]!.equals(msg.subarray(4)), 'the first whole');
    t.ok(bodies[1]!.equals(next.subarray(4)), 'the second whole, split across the first one’s last chunk');
    t.equal(f.buffered, 0, 'nothing held after them');
    // One join of the message and one copy of its body, with room for the
    // few-byte joins of a length split across chunks.
    t.ok(copied <= 3 * stream.length, `${copied} bytes copied for ${stream.length} received (at most 3×)`);
  });
}

t.test('a length split across chunks, and a message that ends mid-chunk', async (t) => {
  const a = message(10, 0x61);
  const b = message(300, 0x62);
  const c = message(1, 0x63);
  const stream = Buffer.concat([a, b, c]);
  for (const cuts of [
    [1, 2, 3],
    [2, 15, 16],
    [14, 15, 200],
    [3, 318, 319],
  ]) {
    const f = new FrameSplitter();
    const bodies: Buffer[] = [];
    let from = 0;
    for (const at of [...cuts, stream.length]) {
      bodies.push(...f.push(stream.subarray(from, at)));
      from = at;
    }
    t.same(
      bodies.map((x) => x.toString('latin1')),
      [a, b, c].map((m) => m.subarray(4).toString('latin1')),
      `cut at ${cuts.join(', ')}`,
    );
    t.equal(f.buffered, 0);
  }
});

t.test('a length of 0 or beyond the limit is refused once its four bytes are in', async (t) => {
  const f = new FrameSplitter();
  t.same(f.push(Buffer.from([0, 0])), [], 'half a length: nothing yet');
  t.throws(() => f.push(Buffer.from([0, 0])), /message length is 0/);
  const g = new FrameSplitter();
  const big = Buffer.alloc(4);
  big.writeUInt32BE(MAX_MESSAGE + 1, 0);
  t.same(g.push(big.subarray(0, 1)), []);
  t.throws(() => g.push(big.subarray(1)), /more than the limit/);
});
