// The ssh-agent protocol's messages (draft-miller-ssh-agent, OpenSSH's
// PROTOCOL.agent and authfd.h): their numbers, the requests postern reads,
// and the replies it sends. Every parser takes a whole message body, type
// byte first, as FrameSplitter returns it, and throws WireError when the
// body is not exactly that message.
import { WireError, WireReader, message, str, u32 } from './wire';

export const MSG = {
  // SSH protocol 1 requests, still numbered so that they can be named in a refusal.
  REQUEST_RSA_IDENTITIES: 1,
  RSA_CHALLENGE: 3,
  ADD_RSA_IDENTITY: 7,
  REMOVE_RSA_IDENTITY: 8,
  REMOVE_ALL_RSA_IDENTITIES: 9,
  ADD_RSA_ID_CONSTRAINED: 24,
  // replies
  FAILURE: 5,
  SUCCESS: 6,
  IDENTITIES_ANSWER: 12,
  SIGN_RESPONSE: 14,
  EXTENSION_FAILURE: 28,
  EXTENSION_RESPONSE: 29,
  // requests
  REQUEST_IDENTITIES: 11,
  SIGN_REQUEST: 13,
  ADD_IDENTITY: 17,
  REMOVE_IDENTITY: 18,
  REMOVE_ALL_IDENTITIES: 19,
  ADD_SMARTCARD_KEY: 20,
  REMOVE_SMARTCARD_KEY: 21,
  LOCK: 22,
  UNLOCK: 23,
  ADD_ID_CONSTRAINED: 25,
  ADD_SMARTCARD_KEY_CONSTRAINED: 26,
  EXTENSION: 27,
} as const;

// Flags of a sign request: which hash an RSA key signs with.
export const SIGN_FLAGS = { RSA_SHA2_256: 2, RSA_SHA2_512: 4 } as const;

export const SESSION_BIND = 'session-bind@openssh.com';

// OpenSSH's agent refuses longer session identifiers (AGENT_MAX_SID_LEN);
// an exchange hash is at most 64 bytes (SHA-512).
export const MAX_SESSION_ID = 128;

function reader(body: Buffer, type: number, name: string): WireReader {
  const r = new WireReader(body);
  const got = r.byte('message type');
  if (got !== type) throw new WireError(`message type ${got} is not ${name} (${type})`);
  return r;
}

export interface SignRequest {
  keyBlob: Buffer;
  data: Buffer;
  flags: number;
}

// byte SSH_AGENTC_SIGN_REQUEST, string key blob, string data, uint32 flags.
export function parseSignRequest(body: Buffer): SignRequest {
  const r = reader(body, MSG.SIGN_REQUEST, 'SSH_AGENTC_SIGN_REQUEST');
  const keyBlob = r.string('key blob');
  const data = r.string('data to sign');
  const flags = r.uint32('flags');
  r.end('sign request');
  return { keyBlob, data, flags };
}

export interface Extension {
  name: string;
  contents: Buffer; // the rest of the message, for the extension's own parser
}

// byte SSH_AGENTC_EXTENSION, string extension name, then its own contents.
export function parseExtension(body: Buffer): Extension {
  const r = reader(body, MSG.EXTENSION, 'SSH_AGENTC_EXTENSION');
  const name = r.text('extension name');
  return { name, contents: body.subarray(body.length - r.remaining) };
}

export interface SessionBind {
  hostKey: Buffer; // the server's host key blob
  sessionId: Buffer; // the exchange hash of the connection's first key exchange
  signature: Buffer; // the host key's signature of sessionId, as the server sent it
  forwarding: boolean;
}

// The contents of session-bind@openssh.com: string host key, string session
// identifier, string signature, bool is_forwarding, and nothing after.
export function parseSessionBind(contents: Buffer): SessionBind {
  const r = new WireReader(contents);
  const hostKey = r.string('host key');
  const sessionId = r.string('session identifier');
  const signature = r.string('signature');
  const forwarding = r.bool('is_forwarding');
  r.end('session-bind');
  if (hostKey.length === 0) throw new WireError('host key is empty');
  if (sessionId.length === 0) throw new WireError('session identifier is empty');
  if (sessionId.length > MAX_SESSION_ID) {
    throw new WireError(`session identifier has ${sessionId.length} bytes, more than ${MAX_SESSION_ID}`);
  }
  return { hostKey, sessionId, signature, forwarding };
}

export interface Identity {
  blob: Buffer;
  comment: string;
}

// byte SSH_AGENT_IDENTITIES_ANSWER, uint32 count, then (string key blob,
// string comment) for each key.
export function identitiesAnswer(identities: readonly Identity[]): Buffer {
  return message(
    MSG.IDENTITIES_ANSWER,
    u32(identities.length),
    ...identities.flatMap((i) => [str(i.blob), str(i.comment)]),
  );
}

// byte SSH_AGENT_SIGN_RESPONSE, string signature blob.
export function signResponse(signatureBlob: Buffer): Buffer {
  return message(MSG.SIGN_RESPONSE, str(signatureBlob));
}

export const FAILURE: Buffer = message(MSG.FAILURE);
export const SUCCESS: Buffer = message(MSG.SUCCESS);
