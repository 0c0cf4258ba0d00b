// A small ssh-agent protocol client (draft-miller-ssh-agent, OpenSSH's
// PROTOCOL.agent) on a Unix socket, written independently of postern's
// parser: it sends any message a client may send, forged ones included
// (a sign request with no binding, a session-bind@openssh.com whose
// signature is wrong, add/remove/lock), and reads each reply. Plus the
// byte strings those messages carry: the data OpenSSH signs for a
// publickey login, and a host's signature over a session id made with the
// host's own private key (as the server would).
import net from 'node:net';
import { utils, ParsedKey } from 'ssh2';

export const MSG = {
  FAILURE: 5,
  SUCCESS: 6,
  REQUEST_IDENTITIES: 11,
  IDENTITIES_ANSWER: 12,
  SIGN_REQUEST: 13,
  SIGN_RESPONSE: 14,
  ADD_IDENTITY: 17,
  REMOVE_IDENTITY: 18,
  REMOVE_ALL_IDENTITIES: 19,
  ADD_SMARTCARD_KEY: 20,
  REMOVE_SMARTCARD_KEY: 21,
  LOCK: 22,
  UNLOCK: 23,
  ADD_ID_CONSTRAINED: 25,
  EXTENSION: 27,
  EXTENSION_FAILURE: 28,
} as const;

export const SIGN_FLAGS = { RSA_SHA2_256: 2, RSA_SHA2_512: 4 } as const;
const USERAUTH_REQUEST = 50;

// --- encoding --------------------------------------------------------------

export function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n >>> 0);
  return b;
}

export function str(x: Buffer | string): Buffer {
  const b = typeof x === 'string' ? Buffer.from(x, 'utf8') : x;
  return Buffer.concat([u32(b.length), b]);
}

export function u8(n: number): Buffer {
  return Buffer.from([n & 0xff]);
}

// One framed message: uint32 length, type byte, contents.
export function frame(type: number, ...parts: Buffer[]): Buffer {
  const body = Buffer.concat([u8(type), ...parts]);
  return Buffer.concat([u32(body.length), body]);
}

// Reads SSH strings out of a buffer, failing loudly on truncation.
export class Reader {
  private at = 0;
  constructor(private readonly b: Buffer) {}
  byte(): number {
    if (this.at + 1 > this.b.length) throw new Error('truncated: byte');
    return this.b[this.at++]!;
  }
  uint32(): number {
    if (this.at + 4 > this.b.length) throw new Error('truncated: uint32');
    const n = this.b.readUInt32BE(this.at);
    this.at += 4;
    return n;
  }
  string(): Buffer {
    const n = this.uint32();
    if (this.at + n > this.b.length) throw new Error('truncated: string');
    const s = this.b.subarray(this.at, this.at + n);
    this.at += n;
    return s;
  }
  get remaining(): number {
    return this.b.length - this.at;
  }
}

// --- what the messages carry ---------------------------------------------

export interface UserauthData {
  sessionId: Buffer;
  user: string;
  service?: string; // default ssh-connection
  method?: string; // default publickey-hostbound-v00@openssh.com
  algorithm: string; // e.g. ssh-ed25519
  keyBlob: Buffer;
  hostKey?: Buffer; // the server's host key blob (hostbound method only)
}

// The data an OpenSSH client asks its agent to sign for a publickey login.
export function userauthData(d: UserauthData): Buffer {
  const method = d.method ?? 'publickey-hostbound-v00@openssh.com';
  return Buffer.concat([
    str(d.sessionId),
    u8(USERAUTH_REQUEST),
    str(d.user),
    str(d.service ?? 'ssh-connection'),
    str(method),
    u8(1),
    str(d.algorithm),
    str(d.keyBlob),
    ...(d.hostKey ? [str(d.hostKey)] : []),
  ]);
}

export interface SessionBind {
  hostKey: Buffer; // the host key blob
  sessionId: Buffer;
  signature: Buffer; // an SSH signature blob: string algorithm, string signature
  forwarding: boolean;
}

export function sessionBindContents(b: SessionBind): Buffer {
  return Buffer.concat([str(b.hostKey), str(b.sessionId), str(b.signature), u8(b.forwarding ? 1 : 0)]);
}

function parsedKey(keyText: string): ParsedKey {
  const k = utils.parseKey(keyText);
  if (k instanceof Error) throw k;
  const one = Array.isArray(k) ? k[0] : k;
  if (!one || one instanceof Error) throw new Error('no key in the text');
  return one;
}

// The public key blob of a private key file (OpenSSH or PEM text).
export function publicBlob(privateKeyText: string): Buffer {
  return parsedKey(privateKeyText).getPublicSSH();
}

// The public key blob of an authorized_keys / .pub line.
export function blobOfLine(line: string): Buffer {
  return Buffer.from(line.trim().split(/\s+/)[1]!, 'base64');
}

// An SSH signature blob over `data` made with a private key file, as a
// server signs its exchange hash (ed25519 keys: algorithm ssh-ed25519).
export function signatureBlob(privateKeyText: string, data: Buffer): Buffer {
  const k = parsedKey(privateKeyText);
  const sig = k.sign(data);
  if (sig instanceof Error) throw sig;
  return Buffer.concat([str(k.type), str(sig)]);
}

// A session-bind that a server holding `hostPrivateKey` would let a client
// send: its host key, a session id, and its signature over that id.
export function boundSession(hostPrivateKey: string, sessionId: Buffer, forwarding = false): SessionBind {
  return {
    hostKey: publicBlob(hostPrivateKey),
    sessionId,
    signature: signatureBlob(hostPrivateKey, sessionId),
    forwarding,
  };
}

// --- the client ------------------------------------------------------------

export interface Reply {
  type: number;
  body: Buffer; // contents after the type byte
}

export interface Identity {
  blob: Buffer;
  comment: string;
}

export class RawAgentClient {
  private buf = Buffer.alloc(0);
  private waiting: { resolve(r: Reply): void; reject(e: Error): void }[] = [];
  private closed: Error | null = null;

  private constructor(private readonly sock: net.Socket) {
    sock.on('data', (d: Buffer) => this.onData(d));
    sock.on('error', (e) => this.fail(e));
    sock.on('close', () => this.fail(new Error('agent socket closed')));
  }

  static connect(path: string): Promise<RawAgentClient> {
    return new Promise((resolve, reject) => {
      const s = net.connect(path);
      s.once('connect', () => resolve(new RawAgentClient(s)));
      s.once('error', reject);
    });
  }

  get isClosed(): boolean {
    return this.closed !== null;
  }

  private onData(d: Buffer): void {
    this.buf = Buffer.concat([this.buf, d]);
    while (this.buf.length >= 4) {
      const n = this.buf.readUInt32BE(0);
      if (this.buf.length < 4 + n) return;
      const body = this.buf.subarray(4, 4 + n);
      this.buf = this.buf.subarray(4 + n);
      const w = this.waiting.shift();
      if (w) w.resolve({ type: body[0] ?? -1, body: body.subarray(1) });
    }
  }

  private fail(e: Error): void {
    this.closed ??= e;
    for (const w of this.waiting.splice(0)) w.reject(e);
  }

  // Sends raw bytes (any framing) and waits for the next reply.
  sendRaw(bytes: Buffer, ms = 30_000): Promise<Reply> {
    if (this.closed) return Promise.reject(this.closed);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no agent reply within ${ms} ms`)), ms);
      this.waiting.push({
        resolve: (r) => {
          clearTimeout(timer);
          resolve(r);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      this.sock.write(bytes);
    });
  }

  request(type: number, ...parts: Buffer[]): Promise<Reply> {
    return this.sendRaw(frame(type, ...parts));
  }

  async identities(): Promise<Identity[]> {
    const r = await this.request(MSG.REQUEST_IDENTITIES);
    if (r.type !== MSG.IDENTITIES_ANSWER) throw new Error(`identities: reply type ${r.type}`);
    const rd = new Reader(r.body);
    const n = rd.uint32();
    const out: Identity[] = [];
    for (let i = 0; i < n; i++) out.push({ blob: rd.string(), comment: rd.string().toString('utf8') });
    if (rd.remaining !== 0) throw new Error(`identities: ${rd.remaining} bytes after the list`);
    return out;
  }

  // A sign request; the signature blob, or null for SSH_AGENT_FAILURE.
  async sign(keyBlob: Buffer, data: Buffer, flags = 0): Promise<Buffer | null> {
    const r = await this.request(MSG.SIGN_REQUEST, str(keyBlob), str(data), u32(flags));
    if (r.type === MSG.FAILURE) return null;
    if (r.type !== MSG.SIGN_RESPONSE) throw new Error(`sign: reply type ${r.type}`);
    const rd = new Reader(r.body);
    const sig = rd.string();
    if (rd.remaining !== 0) throw new Error('sign: bytes after the signature');
    return sig;
  }

  extension(name: string, contents: Buffer = Buffer.alloc(0)): Promise<Reply> {
    return this.request(MSG.EXTENSION, str(name), contents);
  }

  sessionBind(b: SessionBind): Promise<Reply> {
    return this.extension('session-bind@openssh.com', sessionBindContents(b));
  }

  // SSH_AGENTC_ADD_IDENTITY for an ed25519 key: type, public, private||public, comment.
  addEd25519(publicKey32: Buffer, privateSeed32: Buffer, comment: string): Promise<Reply> {
    const both = Buffer.concat([privateSeed32, publicKey32]);
    return this.request(MSG.ADD_IDENTITY, str('ssh-ed25519'), str(publicKey32), str(both), str(comment));
  }

  removeIdentity(keyBlob: Buffer): Promise<Reply> {
    return this.request(MSG.REMOVE_IDENTITY, str(keyBlob));
  }

  removeAll(): Promise<Reply> {
    return this.request(MSG.REMOVE_ALL_IDENTITIES);
  }

  lock(passphrase: string): Promise<Reply> {
    return this.request(MSG.LOCK, str(passphrase));
  }

  unlock(passphrase: string): Promise<Reply> {
    return this.request(MSG.UNLOCK, str(passphrase));
  }

  addSmartcardKey(reader: string, pin: string): Promise<Reply> {
    return this.request(MSG.ADD_SMARTCARD_KEY, str(reader), str(pin));
  }

  close(): void {
    this.sock.destroy();
  }
}

// A signature blob's parts.
export function splitSignature(blob: Buffer): { algorithm: string; signature: Buffer } {
  const rd = new Reader(blob);
  return { algorithm: rd.string().toString('utf8'), signature: rd.string() };
}

// Whether `blob` is a valid signature over `data` by the key of an
// authorized_keys line (checked with ssh2's own verifier; ed25519 and RSA
// with SHA-2, the algorithms a test asks for).
const HASH_OF: Record<string, string | undefined> = {
  'ssh-ed25519': undefined,
  'rsa-sha2-256': 'sha256',
  'rsa-sha2-512': 'sha512',
};

export function verifies(publicKeyLine: string, data: Buffer, blob: Buffer): boolean {
  const { algorithm, signature } = splitSignature(blob);
  if (!(algorithm in HASH_OF)) throw new Error(`verifies: ${algorithm} is not checked here`);
  return parsedKey(publicKeyLine).verify(data, signature, HASH_OF[algorithm]) === true;
}
