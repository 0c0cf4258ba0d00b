// What an SSH client asks its agent to sign when it logs in with a public
// key (RFC 4252 §7, and OpenSSH's publickey-hostbound-v00@openssh.com, which
// adds the server's host key): read with the checks of OpenSSH's own agent
// (ssh-agent.c, parse_userauth_request), so that anything else a client
// could ask to have signed is recognised as not a login.
import { WireError, WireReader } from './wire';
import { keyTypeOf } from './agent-keys';

const SSH_MSG_USERAUTH_REQUEST = 50;
export const METHOD_PUBLICKEY = 'publickey';
export const METHOD_HOSTBOUND = 'publickey-hostbound-v00@openssh.com';

export interface UserauthRequest {
  sessionId: Buffer;
  user: string;
  service: string; // always "ssh-connection"
  method: string; // METHOD_PUBLICKEY or METHOD_HOSTBOUND
  algorithm: string; // the signature algorithm the client announced
  keyBlob: Buffer; // the client's public key
  hostKey: Buffer | null; // the server's host key, with METHOD_HOSTBOUND only
}

// The signature algorithms that a key type can announce in a login.
const ALGORITHMS_OF: Readonly<Record<string, readonly string[]>> = {
  'ssh-ed25519': ['ssh-ed25519'],
  'ecdsa-sha2-nistp256': ['ecdsa-sha2-nistp256'],
  'ecdsa-sha2-nistp384': ['ecdsa-sha2-nistp384'],
  'ecdsa-sha2-nistp521': ['ecdsa-sha2-nistp521'],
  'ssh-rsa': ['ssh-rsa', 'rsa-sha2-256', 'rsa-sha2-512'],
};

function read(data: Buffer): UserauthRequest | null {
  const r = new WireReader(data);
  const sessionId = r.string('session identifier');
  if (sessionId.length === 0) return null;
  if (r.byte('message type') !== SSH_MSG_USERAUTH_REQUEST) return null;
  const user = r.text('user name');
  const service = r.text('service name');
  const method = r.text('method name');
  if (!r.bool('has signature')) return null;
  const algorithm = r.text('public key algorithm');
  const keyBlob = r.string('public key blob');
  const hostKey = method === METHOD_HOSTBOUND ? r.string('server host key') : null;
  r.end('user authentication request');
  if (service !== 'ssh-connection') return null;
  if (method !== METHOD_PUBLICKEY && method !== METHOD_HOSTBOUND) return null;
  const type = keyTypeOf(keyBlob);
  if (type === null || !(ALGORITHMS_OF[type] ?? []).includes(algorithm)) return null;
  if (hostKey !== null && keyTypeOf(hostKey) === null) return null;
  return { sessionId, user, service, method, algorithm, keyBlob, hostKey };
}

// The login request in data to be signed, or null when data is anything
// else (including a malformed request: never a throw).
export function parseUserauthRequest(data: Buffer): UserauthRequest | null {
  try {
    return read(data);
  } catch (e) {
    if (e instanceof WireError) return null;
    throw e;
  }
}
