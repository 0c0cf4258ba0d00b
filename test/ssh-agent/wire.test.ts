// The ssh-agent wire: the field reader refuses every truncation and every
// length past the end with a WireError naming the field and the offset; the
// frame splitter gives the same bodies however the stream is cut (byte by
// byte, several messages per chunk) and refuses a zero length or more than
// 256 KiB as soon as the length arrives; the message parsers take exactly
// their message and nothing more. The replies are checked by the real
// OpenSSH ssh-add against an agent made of these modules alone: `ssh-add -L`
// lists the keys (and "no identities"), `ssh-add -T` has ed25519 and ECDSA
// keys sign and verifies the signatures while its SHA-1 request to the RSA
// key is refused, `ssh-add -D` is told the agent failed.
import t, { Test } from 'tap';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { FrameSplitter, MAX_MESSAGE, WireError, WireReader, message, str, u32, u8 } from '../../daemon/ssh-agent/wire';
import {
  FAILURE,
  MSG,
  SUCCESS,
  identitiesAnswer,
  parseExtension,
  parseSessionBind,
  parseSignRequest,
  signResponse,
} from '../../daemon/ssh-agent/messages';
import { startCodecAgent } from '../helpers/codec-agent';

const run = promisify(execFile);

function wireError(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    if (e instanceof WireError) return e.message;
    throw e;
  }
  return 'no error';
}

const short = (what: string, n: number, at: number, left: number): string =>
  `${what} needs ${n} bytes at offset ${at}, only ${left} remain`;

// Cut the message at every offset: each cut must be refused for the field
// it falls in, given as [name, size] in order.
function everyCut(t: Test, whole: Buffer, parse: (b: Buffer) => unknown, fields: [string, number][]): void {
  let end = 0;
  const spans = fields.map(([what, size]) => {
    const span = { what, at: end, size };
    end += size;
    return span;
  });
  t.equal(end, whole.length, 'the fields cover the whole message');
  for (let n = 0; n < whole.length; n += 1) {
    const { what, at, size } = spans.find((f) => n < f.at + f.size)!;
    t.equal(
      wireError(() => parse(whole.subarray(0, n))),
      short(what, size, at, n - at),
      `cut at ${n}`,
    );
  }
}

// ---- the reader ----

t.test('WireReader reads each field and refuses every truncation, naming the field', async (t) => {
  const whole = Buffer.concat([u8(7), u32(0x01020304), u8(1), str(Buffer.from('blob')), str('naïve')]);
  const readAll = (b: Buffer): unknown[] => {
    const r = new WireReader(b);
    const out = [r.byte('type'), r.uint32('count'), r.bool('flag'), r.string('blob'), r.text('name')];
    r.end();
    return out;
  };
  t.same(readAll(whole), [7, 0x01020304, true, Buffer.from('blob'), 'naïve']);

  // The field each truncation point falls in: [name, offset, size].
  everyCut(t, whole, readAll, [
    ['type', 1],
    ['count', 4],
    ['flag', 1],
    ['length of blob', 4],
    ['blob', 4],
    ['length of name', 4],
    ['name', 6],
  ]);
  t.equal(
    wireError(() => readAll(Buffer.concat([whole, Buffer.from([9, 9])]))),
    'message has 2 unexpected bytes after offset 24',
    'trailing bytes',
  );
});

t.test('WireReader: lengths past the end, bad booleans, bad text, mpints', async (t) => {
  const rows: [string, Buffer, (r: WireReader) => unknown, string][] = [
    [
      'length past the end',
      Buffer.concat([u32(10), Buffer.from('abc')]),
      (r) => r.string('key'),
      short('key', 10, 4, 3),
    ],
    [
      'length 2^32-1',
      Buffer.concat([u32(0xffffffff), Buffer.from('abc')]),
      (r) => r.string('key'),
      short('key', 0xffffffff, 4, 3),
    ],
    ['text length 2^32-1', u32(0xffffffff), (r) => r.text('name'), short('name', 0xffffffff, 4, 0)],
    ['bool 2', Buffer.from([2]), (r) => r.bool('is_forwarding'), 'is_forwarding at offset 0 is 2, not 0 or 1'],
    ['bool 255', Buffer.from([255]), (r) => r.bool('flag'), 'flag at offset 0 is 255, not 0 or 1'],
    ['invalid UTF-8', str(Buffer.from([0x61, 0xff])), (r) => r.text('user'), 'user at offset 0 is not valid UTF-8'],
    ['overlong UTF-8', str(Buffer.from([0xc0, 0xaf])), (r) => r.text('user'), 'user at offset 0 is not valid UTF-8'],
    ['NUL in text', str(Buffer.from('root\0x')), (r) => r.text('user'), 'user at offset 0 contains a NUL byte'],
    ['negative mpint', str(Buffer.from([0x80, 1])), (r) => r.mpint('r'), 'r at offset 0 is negative'],
    ['mpint cut', Buffer.concat([u32(5), Buffer.from([0, 1])]), (r) => r.mpint('s'), short('s', 5, 4, 2)],
    ['empty', Buffer.alloc(0), (r) => r.uint32('flags'), short('flags', 4, 0, 0)],
  ];
  for (const [what, buf, read, expected] of rows)
    t.equal(
      wireError(() => read(new WireReader(buf))),
      expected,
      what,
    );

  const r = new WireReader(Buffer.concat([str(Buffer.from([0, 0, 0x80, 1])), str(Buffer.alloc(0)), str('')]));
  t.same([...r.mpint()], [0x80, 1], 'mpint: leading zeros removed');
  t.same([...r.mpint()], [], 'mpint: zero is empty');
  t.equal(r.remaining, 4);
  t.equal(r.text(), '', 'empty text');
  t.equal(r.remaining, 0);
  r.end();
  const view = Buffer.concat([str('abc')]);
  const s = new WireReader(view).string();
  view[4] = 0x7a;
  t.equal(s.toString(), 'zbc', 'string() is a view of the message, not a copy');
});

t.test('writers', async (t) => {
  t.same([...u8(255)], [255]);
  t.same([...u32(0xffffffff)], [255, 255, 255, 255]);
  t.same([...str('é')], [0, 0, 0, 2, 0xc3, 0xa9], 'text is written as UTF-8');
  t.same([...str(Buffer.from([1, 2]))], [0, 0, 0, 2, 1, 2]);
  t.same([...message(5)], [0, 0, 0, 1, 5]);
  t.same([...message(14, str('ab'), u8(1))], [0, 0, 0, 8, 14, 0, 0, 0, 2, 0x61, 0x62, 1]);
  t.same([...FAILURE], [0, 0, 0, 1, 5]);
  t.same([...SUCCESS], [0, 0, 0, 1, 6]);
});

// ---- framing ----

t.test('FrameSplitter: the same bodies however the stream is cut', async (t) => {
  const bodies = [Buffer.from([11]), Buffer.concat([u8(13), str('key'), str('data'), u32(2)]), Buffer.from([5])];
  const stream = Buffer.concat(bodies.map((b) => Buffer.concat([u32(b.length), b])));

  const all = new FrameSplitter().push(stream);
  t.same(all, bodies, 'several messages in one chunk');

  const f = new FrameSplitter();
  const got: Buffer[] = [];
  for (let i = 0; i < stream.length; i += 1) got.push(...f.push(stream.subarray(i, i + 1)));
  t.same(got, bodies, 'byte by byte');
  t.equal(f.buffered, 0);

  for (let cut = 0; cut <= stream.length; cut += 1) {
    const g = new FrameSplitter();
    const out = [...g.push(stream.subarray(0, cut)), ...g.push(stream.subarray(cut))];
    if (!out.every((b, i) => b.equals(bodies[i]!)) || out.length !== bodies.length) t.fail(`cut at ${cut}`);
  }

  const partial = new FrameSplitter();
  t.same(partial.push(Buffer.from([0, 0, 0])), [], 'three bytes of a length: nothing yet');
  t.equal(partial.buffered, 3);
  t.same(partial.push(Buffer.from([2, 11])), [], 'a length and half a body: nothing yet');
  t.same(partial.push(Buffer.from([0])), [Buffer.from([11, 0])]);

  // A body is a copy: changing the chunk afterwards does not change it.
  const chunk = Buffer.concat([u32(1), u8(11)]);
  const [body] = new FrameSplitter().push(chunk);
  chunk[4] = 0;
  t.same([...body!], [11], 'bodies do not share the chunk memory');

  const max = Buffer.alloc(MAX_MESSAGE, 0x41);
  t.equal(MAX_MESSAGE, 262144);
  t.same(new FrameSplitter().push(Buffer.concat([u32(MAX_MESSAGE), max])), [max], 'exactly 256 KiB is accepted');
});

t.test('FrameSplitter refuses a zero length and more than 256 KiB as soon as the length arrives', async (t) => {
  const rows: [string, Buffer[], string][] = [
    ['zero length', [u32(0)], 'message length is 0; a message has at least its type byte'],
    [
      'zero length after a message',
      [Buffer.concat([u32(1), u8(11), u32(0)])],
      'message length is 0; a message has at least its type byte',
    ],
    ['256 KiB + 1', [u32(MAX_MESSAGE + 1)], `message length 262145 is more than the limit of 262144 bytes`],
    ['2^32-1', [u32(0xffffffff)], 'message length 4294967295 is more than the limit of 262144 bytes'],
    [
      'a long length byte by byte',
      [...u32(MAX_MESSAGE + 1)].map((b) => Buffer.from([b])),
      'message length 262145 is more than the limit of 262144 bytes',
    ],
  ];
  for (const [what, chunks, expected] of rows) {
    const f = new FrameSplitter();
    t.equal(
      wireError(() => chunks.forEach((c) => f.push(c))),
      expected,
      what,
    );
  }
});

// ---- messages ----

t.test('parseSignRequest: exactly key blob, data, flags', async (t) => {
  const body = Buffer.concat([u8(MSG.SIGN_REQUEST), str('KEY'), str('DATA!'), u32(4)]);
  const req = parseSignRequest(body);
  t.same(
    { ...req, keyBlob: req.keyBlob.toString(), data: req.data.toString() },
    { keyBlob: 'KEY', data: 'DATA!', flags: 4 },
  );
  everyCut(t, body, parseSignRequest, [
    ['message type', 1],
    ['length of key blob', 4],
    ['key blob', 3],
    ['length of data to sign', 4],
    ['data to sign', 5],
    ['flags', 4],
  ]);
  t.equal(
    wireError(() => parseSignRequest(Buffer.concat([body, u8(0)]))),
    'sign request has 1 unexpected bytes after offset 21',
  );
  t.equal(
    wireError(() => parseSignRequest(Buffer.concat([u8(MSG.REQUEST_IDENTITIES), body.subarray(1)]))),
    'message type 11 is not SSH_AGENTC_SIGN_REQUEST (13)',
  );
  t.equal(
    wireError(() => parseSignRequest(Buffer.concat([u8(13), u32(0xffffffff), Buffer.from('KEY')]))),
    short('key blob', 0xffffffff, 5, 3),
  );
});

const bindContents = (over: Partial<Record<'hostKey' | 'sessionId' | 'signature', Buffer>> = {}, fwd = 0): Buffer =>
  Buffer.concat([
    str(over.hostKey ?? Buffer.from('HOSTKEY')),
    str(over.sessionId ?? Buffer.alloc(32, 0x11)),
    str(over.signature ?? Buffer.from('SIG')),
    u8(fwd),
  ]);

t.test('parseExtension and parseSessionBind', async (t) => {
  const contents = bindContents();
  const body = Buffer.concat([u8(MSG.EXTENSION), str('session-bind@openssh.com'), contents]);
  const ext = parseExtension(body);
  t.equal(ext.name, 'session-bind@openssh.com');
  t.ok(ext.contents.equals(contents), 'contents: the rest of the message');
  t.same(parseExtension(Buffer.concat([u8(27), str('query')])), { name: 'query', contents: Buffer.alloc(0) });
  t.equal(
    wireError(() => parseExtension(Buffer.from([27, 0, 0]))),
    short('length of extension name', 4, 1, 2),
  );
  t.equal(
    wireError(() => parseExtension(Buffer.from([13]))),
    'message type 13 is not SSH_AGENTC_EXTENSION (27)',
  );
  t.equal(
    wireError(() => parseExtension(Buffer.concat([u8(27), str(Buffer.from([0xfe]))]))),
    'extension name at offset 1 is not valid UTF-8',
  );

  const bind = parseSessionBind(contents);
  t.same(
    {
      ...bind,
      hostKey: bind.hostKey.toString(),
      sessionId: bind.sessionId.toString('hex'),
      signature: bind.signature.toString(),
    },
    { hostKey: 'HOSTKEY', sessionId: '11'.repeat(32), signature: 'SIG', forwarding: false },
  );
  t.equal(parseSessionBind(bindContents({}, 1)).forwarding, true, 'is_forwarding 1');
  t.equal(parseSessionBind(bindContents({ sessionId: Buffer.alloc(128, 1) })).sessionId.length, 128, '128-byte id');

  everyCut(t, contents, parseSessionBind, [
    ['length of host key', 4],
    ['host key', 7],
    ['length of session identifier', 4],
    ['session identifier', 32],
    ['length of signature', 4],
    ['signature', 3],
    ['is_forwarding', 1],
  ]);
  const rows: [string, Buffer, string][] = [
    [
      'a byte after is_forwarding',
      Buffer.concat([contents, u8(0)]),
      'session-bind has 1 unexpected bytes after offset 55',
    ],
    ['is_forwarding 2', bindContents({}, 2), 'is_forwarding at offset 54 is 2, not 0 or 1'],
    ['empty host key', bindContents({ hostKey: Buffer.alloc(0) }), 'host key is empty'],
    ['empty session identifier', bindContents({ sessionId: Buffer.alloc(0) }), 'session identifier is empty'],
    [
      '129-byte session identifier',
      bindContents({ sessionId: Buffer.alloc(129) }),
      'session identifier has 129 bytes, more than 128',
    ],
    [
      'host key length 2^32-1',
      Buffer.concat([u32(0xffffffff), contents.subarray(4)]),
      short('host key', 0xffffffff, 4, 51),
    ],
  ];
  for (const [what, buf, expected] of rows)
    t.equal(
      wireError(() => parseSessionBind(buf)),
      expected,
      what,
    );
});

t.test('identitiesAnswer and signResponse bytes', async (t) => {
  t.same([...identitiesAnswer([])], [0, 0, 0, 5, 12, 0, 0, 0, 0]);
  t.same(
    [
      ...identitiesAnswer([
        { blob: Buffer.from([1, 2]), comment: 'a' },
        { blob: Buffer.from([3]), comment: 'é' },
      ]),
    ],
    [0, 0, 0, 27, 12, 0, 0, 0, 2, 0, 0, 0, 2, 1, 2, 0, 0, 0, 1, 0x61, 0, 0, 0, 1, 3, 0, 0, 0, 2, 0xc3, 0xa9],
  );
  t.same([...signResponse(Buffer.from([9, 8]))], [0, 0, 0, 7, 14, 0, 0, 0, 2, 9, 8]);
});

// ---- against ssh-add ----

t.test('ssh-add lists, tests and fails against an agent of these modules', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'postern-wire-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const specs: [string, string[]][] = [
    ['ed25519', ['-t', 'ed25519']],
    ['ecdsa', ['-t', 'ecdsa', '-b', '384']],
    ['rsa', ['-t', 'rsa', '-b', '2048']],
  ];
  await Promise.all(
    specs.map(([n, args]) => run('ssh-keygen', ['-q', ...args, '-N', '', '-C', n, '-f', join(dir, n)])),
  );
  const keys = specs.map(([n]) => ({ name: n, text: readFileSync(join(dir, n)), pub: join(dir, `${n}.pub`) }));
  const agent = await startCodecAgent(keys.map((k) => ({ text: k.text, comment: `cred-${k.name}` })));
  const empty = await startCodecAgent([]);
  t.teardown(() => Promise.all([agent.close(), empty.close()]));
  const sshAdd = (sock: string, args: string[]): Promise<{ code: number; out: string }> =>
    new Promise((resolve) => {
      execFile('ssh-add', args, { env: { PATH: process.env.PATH, SSH_AUTH_SOCK: sock } }, (err, stdout, stderr) =>
        resolve({ code: err ? ((err as { code?: number }).code ?? -1) : 0, out: `${stdout}${stderr}` }),
      );
    });

  const listed = await sshAdd(agent.socket, ['-L']);
  const expected = keys.map((k) => {
    const [type, b64] = readFileSync(k.pub, 'latin1').split(' ');
    return `${type} ${b64} cred-${k.name}\n`;
  });
  t.same(listed, { code: 0, out: expected.join('') }, 'ssh-add -L: each key with its comment');
  t.same(await sshAdd(empty.socket, ['-L']), { code: 1, out: 'The agent has no identities.\n' }, 'empty list');

  for (const k of keys.filter((k) => k.name !== 'rsa')) {
    const tested = await sshAdd(agent.socket, ['-T', k.pub]);
    t.same(tested, { code: 0, out: '' }, `ssh-add -T ${k.name}: the agent's signature verifies`);
  }
  // OpenSSH 9.2's ssh-add -T asks an RSA key for no SHA-2 flag: a SHA-1
  // ssh-rsa signature, which the agent refuses.
  const rsa = keys.find((k) => k.name === 'rsa')!;
  t.same(
    await sshAdd(agent.socket, ['-T', rsa.pub]),
    { code: 1, out: `Agent signature failed for ${rsa.pub}: agent refused operation\r\n` },
    'ssh-add -T rsa: SHA-1 refused',
  );
  const signs = agent.connections
    .flat()
    .filter((b) => b[0] === MSG.SIGN_REQUEST)
    .map(parseSignRequest);
  t.same(
    signs.map((s) => s.flags),
    [0, 0, 0],
    'one sign request per key, without flags',
  );

  const removed = await sshAdd(agent.socket, ['-D']);
  t.equal(removed.code, 1, 'ssh-add -D: failure');
  t.match(removed.out, /Failed to remove all identities/);
});
