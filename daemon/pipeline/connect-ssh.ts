// SPEC §6.6 step 8 for SSH: connect to the checked address and only to it,
// the server's host key compared with the pinned fingerprint before any
// authentication is attempted (the handshake repeated, asking for other
// host key types, until the server shows the pinned key). Connections are
// kept and lent by daemon/stores/ssh-connections.ts. Nothing but exec
// channels is ever opened: no pty, no agent or port forwarding, no
// environment.
import type { SecretBytes } from '../../shared/secret-bytes';
import { createHash } from 'node:crypto';
import net from 'node:net';
import type { Client, ConnectConfig } from 'ssh2';
import { ssh2 } from '../../shared/ssh2-module';
import { Refusal } from '../../shared/errors';
import { connectFailure, connectTimeout } from './ssh-failures';
import type { Connected, SshTarget } from '../stores/ssh-connections';
import type { SshCredentialDef } from '../../shared/credential';

export function fingerprintOf(hostKey: Buffer): string {
  return `SHA256:${createHash('sha256').update(hostKey).digest('base64').replace(/=+$/, '')}`;
}

// The host key types a server may have, each with the signature algorithms
// that ask for it (one RSA key serves three), in ssh2's order of preference.
// A server shows one host key per handshake: the one of the first type in
// the client's list that it has.
const HOST_KEY_TYPES: readonly { type: string; algorithms: readonly string[] }[] = [
  { type: 'ssh-ed25519', algorithms: ['ssh-ed25519'] },
  { type: 'ecdsa-sha2-nistp256', algorithms: ['ecdsa-sha2-nistp256'] },
  { type: 'ecdsa-sha2-nistp384', algorithms: ['ecdsa-sha2-nistp384'] },
  { type: 'ecdsa-sha2-nistp521', algorithms: ['ecdsa-sha2-nistp521'] },
  { type: 'ssh-rsa', algorithms: ['rsa-sha2-512', 'rsa-sha2-256', 'ssh-rsa'] },
];

// The key type named at the start of a public key blob (RFC 4253 §6.6).
function blobType(blob: Buffer): string {
  if (blob.length < 4) return '?';
  const n = blob.readUInt32BE(0);
  return n <= blob.length - 4 ? blob.subarray(4, 4 + n).toString('latin1') : '?';
}

export interface OfferedHostKey {
  type: string;
  fingerprint: string;
}

function describeOffered(offered: readonly OfferedHostKey[]): string {
  return offered.map((k) => `${k.type} ${k.fingerprint}`).join(', ');
}

function mismatch(def: SshCredentialDef, offered: readonly OfferedHostKey[]): Refusal {
  const seen =
    offered.length > 0
      ? `it offered ${describeOffered(offered)} (every host key type postern can use was asked for), and the pin is ${def.host_key}`
      : `it offered no host key of a type postern can use (${HOST_KEY_TYPES.map((g) => g.type).join(', ')})`;
  return new Refusal(
    'host_key_mismatch',
    `the host key of ${def.host} is not the pinned one; nothing was sent: ${seen}. If the server's key really changed, a human must check it (e.g. \`ssh-keyscan -p ${def.port} ${def.host} | ssh-keygen -lf -\` on a trusted network) and update host_key with \`postern cred update\``,
    { host_key: def.host_key, offered_host_keys: offered.map((k) => ({ ...k })) },
  );
}

// One handshake's end: logged in, or the host key shown was not the pinned
// one (nothing was sent), or the server has no key of the types asked for.
type Handshake =
  | { kind: 'ready'; client: Client; hostKeyType: string }
  | { kind: 'other-key'; offered: OfferedHostKey }
  | { kind: 'no-such-type' };

type Login = { privateKey: Buffer } | { password: string };

// One TCP connection to the checked address, asking for host keys of the
// given algorithms only. Authentication starts only once ssh2 has the host
// key accepted here and its signature verified.
function handshake(t: SshTarget, login: Login, algorithms: string[], timeoutMs: number): Promise<Handshake> {
  const { def, address } = t;
  return new Promise((resolve, reject) => {
    const client = new (ssh2().Client)();
    let offered: OfferedHostKey | null = null;
    let matched: string | null = null;
    let timedOut = false;
    let settled = false;
    const timer = setTimeout(() => {
      timedOut = true;
      fail(null);
    }, timeoutMs);
    const settle = (): boolean => {
      if (settled) return false;
      settled = true;
      clearTimeout(timer);
      return true;
    };
    const fail = (e: unknown): void => {
      if (!settle()) return;
      client.end();
      if (offered) resolve({ kind: 'other-key', offered });
      else if (
        !timedOut &&
        (e as { level?: string })?.level === 'handshake' &&
        /no matching host key format/.test((e as Error).message)
      )
        resolve({ kind: 'no-such-type' });
      else reject(connectFailure(e, def.host, timedOut));
    };
    client.on('ready', () => {
      if (settle()) resolve({ kind: 'ready', client, hostKeyType: matched ?? '?' });
    });
    client.on('error', fail);
    client.on('close', () => fail(new Error('closed')));
    // The TCP connection goes to the checked address, made here so nothing
    // else resolves anything. No Nagle: OpenSSH leaves it on for exec
    // sessions, and the small packets of a short command would otherwise
    // wait for delayed ACKs (tens of milliseconds a command).
    const sock = net.connect({ host: address, port: def.port });
    sock.setNoDelay(true);
    const config: ConnectConfig = {
      sock,
      username: def.user,
      algorithms: { serverHostKey: algorithms as NonNullable<ConnectConfig['algorithms']>['serverHostKey'] },
      // During key exchange, before any authentication: on a mismatch the
      // secret is never offered.
      hostVerifier: (key: Buffer) => {
        const fingerprint = fingerprintOf(key);
        if (fingerprint === def.host_key) {
          matched = blobType(key);
          return true;
        }
        offered = { type: blobType(key), fingerprint };
        return false;
      },
      readyTimeout: timeoutMs,
      tryKeyboard: false,
      keepaliveInterval: 5_000,
      keepaliveCountMax: 3,
      ...login,
    };
    try {
      client.connect(config);
    } catch (e) {
      fail(e);
    }
  });
}

// Connects with the secret, which the caller wipes once this resolves.
// The pin names one host key, but a server shows only one key per
// handshake, chosen by the client's list of types. So while the key shown
// is another one, postern connects again (a new TCP connection to the same
// checked address, nothing sent) asking only for the types not seen yet,
// until the pinned key is shown or every type was seen. `preferred`: the
// type that matched before, asked for first.
export async function connectSsh(
  t: SshTarget,
  opened: SecretBytes,
  timeoutMs: number,
  preferred?: string,
): Promise<Connected> {
  const secret = opened.bytes;
  const deadline = Date.now() + timeoutMs;
  const order = [...HOST_KEY_TYPES].sort((a, b) => Number(b.type === preferred) - Number(a.type === preferred));
  const offered: OfferedHostKey[] = [];
  const login: Login = t.def.auth === 'key' ? { privateKey: secret } : { password: secret.toString('utf8') };
  for (;;) {
    const left = order.filter((g) => !offered.some((k) => k.type === g.type));
    if (left.length === 0) throw mismatch(t.def, offered);
    const ms = deadline - Date.now();
    if (ms <= 0) throw connectTimeout(t.def.host);
    const h = await handshake(
      t,
      login,
      left.flatMap((g) => g.algorithms),
      ms,
    );
    if (h.kind === 'ready') return { client: h.client, hostKeyType: h.hostKeyType };
    if (h.kind === 'no-such-type') throw mismatch(t.def, offered);
    // A key of a type not asked for, or seen already, ends the search.
    if (!left.some((g) => g.type === h.offered.type)) {
      offered.push(h.offered);
      throw mismatch(t.def, offered);
    }
    offered.push(h.offered);
  }
}
