// One handler per ssh-agent message (OpenSSH's PROTOCOL.agent, as
// ssh-agent.c dispatches them): list the offered keys, bind a session,
// sign under the rule of sign-check.ts after approval; every other request
// (adding, removing, locking keys, smartcards, unknown extensions and
// types) is refused. A refusal is answered SSH_AGENT_FAILURE (the protocol
// carries no reason); its reason goes to the journal and the daemon log.
import { Refusal } from '../../shared/errors';
import type { SshAgentFacts } from '../../shared/events';
import type { Identity } from '../identity/identify';
import type { PipelineServices } from '../pipeline/context';
import { approve } from '../pipeline/approve';
import { sha256, who } from '../pipeline/evidence';
import { agentCredentials, type AgentCredential } from './agent-credentials';
import { ConnectionBindings } from './bindings';
import { checkSignRequest, signRequestFacts } from './sign-check';
import { AgentKeyError, signAsAgent, signatureAlgorithmFor, verifyHostSignature } from './agent-keys';
import {
  FAILURE,
  MSG,
  SUCCESS,
  identitiesAnswer,
  parseExtension,
  parseSessionBind,
  parseSignRequest,
  signResponse,
} from './messages';
import { WireError, WireReader } from './wire';

export interface AgentConnection {
  services: PipelineServices;
  bindings: ConnectionBindings;
  requireUnlocked(): void;
  touch(): void;
  // Aborted when the client goes away: a pending card is withdrawn.
  signal: AbortSignal;
  warn(event: string, fields: Record<string, unknown>, message: string): void;
}

// What a refusal knew when it was made: the journal entry's fields.
export class AgentRefusal extends Error {
  constructor(
    readonly refusal: Refusal,
    readonly facts: SshAgentFacts,
  ) {
    super(refusal.message);
  }
}

const SESSION_BIND = 'session-bind@openssh.com';
// Long enough for any real user name; what a client sends is kept to this
// in the journal.
const SHOWN_USER = 256;

// The journal fields of a request, as far as they are known.
export function facts(request: string, more: Partial<SshAgentFacts> = {}): SshAgentFacts {
  return {
    request,
    credential: null,
    host: null,
    host_key: null,
    user: null,
    session: null,
    forwarded: false,
    ...more,
  };
}

function refused(request: string, message: string, code: 'denied_policy' | 'bad_request' = 'denied_policy') {
  return async (): Promise<Buffer> => {
    throw new AgentRefusal(new Refusal(code, message), facts(request));
  };
}

const KEYS_ARE_THE_VAULTS =
  "postern's ssh-agent offers only the keys of SSH credentials with ssh_agent = true; keys are added with `postern cred add` and removed with `postern cred rm`";

// When locked: no keys (the client tries its other ways to log in).
async function listIdentities(c: AgentConnection): Promise<Buffer> {
  let vault;
  try {
    vault = c.services.vault();
  } catch {
    return identitiesAnswer([]);
  }
  const creds = await agentCredentials(vault, (name, e) =>
    c.warn(
      'ssh_agent_key_unreadable',
      { credential: name, err: (e as Error)?.message },
      'an ssh-agent key could not be read',
    ),
  );
  return identitiesAnswer(creds.map((k) => ({ blob: k.blob, comment: k.def.name })));
}

function bindSession(c: AgentConnection, contents: Buffer): Buffer {
  let bind;
  try {
    bind = parseSessionBind(contents);
  } catch (e) {
    throw new AgentRefusal(malformed(e, SESSION_BIND), facts('session-bind'));
  }
  const known = { host_key: null, session: sha256(bind.sessionId), forwarded: bind.forwarding };
  if (!verifyHostSignature(bind.hostKey, bind.sessionId, bind.signature))
    throw new AgentRefusal(
      new Refusal(
        'bad_request',
        'the session-bind@openssh.com signature does not verify with the host key it names; this connection stays unbound',
      ),
      facts('session-bind', known),
    );
  if (!c.bindings.add(bind))
    throw new AgentRefusal(
      new Refusal('denied_policy', 'this agent connection has bound too many sessions; open a new connection'),
      facts('session-bind', known),
    );
  return SUCCESS;
}

async function extension(c: AgentConnection, body: Buffer): Promise<Buffer> {
  let ext;
  try {
    ext = parseExtension(body);
  } catch (e) {
    throw new AgentRefusal(malformed(e, 'extension'), facts('extension'));
  }
  if (ext.name === SESSION_BIND) return bindSession(c, ext.contents);
  const name = ext.name.slice(0, 64);
  throw new AgentRefusal(
    new Refusal(
      'denied_policy',
      `postern's ssh-agent offers no extension ${JSON.stringify(name)}; only ${SESSION_BIND}`,
    ),
    facts(`extension ${name}`),
  );
}

async function sign(c: AgentConnection, body: Buffer, identity: Identity): Promise<Buffer> {
  let req;
  try {
    req = parseSignRequest(body);
  } catch (e) {
    throw new AgentRefusal(malformed(e, 'sign request'), facts('sign'));
  }
  const bound = c.bindings.current;
  const read = signRequestFacts(c.bindings, req.data);
  const known = facts('sign', {
    host_key: read.hostKey,
    user: read.user === null ? null : read.user.slice(0, SHOWN_USER),
    session: bound ? sha256(bound.sessionId) : null,
    forwarded: c.bindings.forwarded,
  });
  try {
    c.requireUnlocked();
    c.touch();
    const vault = c.services.vault();
    const creds = await agentCredentials(vault, () => undefined);
    const cred = credentialFor(creds, req.keyBlob, read);
    if (!cred)
      throw new Refusal(
        'unknown_credential',
        'no SSH credential with ssh_agent = true has this key; list the offered keys with `ssh-add -L`',
      );
    const def = cred.def;
    Object.assign(known, { credential: def.name, host: def.host });
    const allowed = checkSignRequest(def, c.bindings, req.data, cred.blob);
    // A login that names another algorithm than the flags ask for cannot
    // succeed: refused before a human is asked about it.
    const algorithm = signatureAlgorithmFor(cred.blob, req.flags);
    if (algorithm !== allowed.login.algorithm) throw algorithmMismatch(allowed.login.algorithm);
    // The peer was checked to still run once this message was whole
    // (server.ts, answer): a session rooted at it is not checked again.
    const ctx = { services: c.services, identity, signal: c.signal, requesterConfirmed: true } as const;
    const approval = await approve(ctx, def, def.approve, {
      kind: 'ssh-agent',
      host: def.host,
      port: def.port,
      host_key: allowed.hostKey,
      user: def.user,
      algorithm: allowed.login.algorithm,
    });
    const signature = await vault.withCredentialSecret(def, async (secret) =>
      signAsAgent(secret.bytes, req.data, req.flags),
    );
    if (new WireReader(signature).text() !== allowed.login.algorithm) throw algorithmMismatch(allowed.login.algorithm);
    // Durable before the signature leaves: a login the journal cannot
    // record does not happen.
    await c.services.journal.record({
      kind: 'ssh_agent_sign',
      ...who(identity),
      credential: def.name,
      host: def.host,
      host_key: allowed.hostKey,
      user: def.user,
      session: sha256(allowed.binding.sessionId),
      algorithm: allowed.login.algorithm,
      ...approval,
    });
    return signResponse(signature);
  } catch (e) {
    if (e instanceof AgentRefusal) throw e;
    const r =
      e instanceof Refusal
        ? e
        : e instanceof WireError
          ? new Refusal('bad_request', e.message)
          : e instanceof AgentKeyError
            ? new Refusal('denied_policy', e.message)
            : new Refusal('internal_error', 'unexpected error; see the daemon log');
    throw new AgentRefusal(r, known);
  }
}

// One key may be stored in several credentials, each pinned to its server
// and user: the one the login matches signs (its pin, then its user too),
// else the first by name, whose checks then say why the login is refused.
function credentialFor(
  creds: AgentCredential[],
  keyBlob: Buffer,
  login: { hostKey: string | null; user: string | null },
): AgentCredential | undefined {
  const withKey = creds.filter((k) => k.blob.equals(keyBlob));
  const pinned = withKey.filter((k) => k.def.host_key === login.hostKey);
  return pinned.find((k) => k.def.user === login.user) ?? pinned[0] ?? withKey[0];
}

function algorithmMismatch(named: string): Refusal {
  return new Refusal(
    'denied_policy',
    `the login names signature algorithm ${JSON.stringify(named.slice(0, 64))}, which the sign request's flags do not ask for`,
  );
}

function malformed(e: unknown, what: string): Refusal {
  const why = e instanceof WireError ? e.message : 'it could not be read';
  return new Refusal('bad_request', `malformed ${what}: ${why}`);
}

// `identity`: the peer, identified for this message by the server.
export type Handler = (c: AgentConnection, body: Buffer, identity: Identity) => Promise<Buffer>;

// By message number; anything not here is refused as unknown.
export const HANDLERS: ReadonlyMap<number, Handler> = new Map<number, Handler>([
  [MSG.REQUEST_IDENTITIES, listIdentities],
  [MSG.SIGN_REQUEST, sign],
  [MSG.EXTENSION, extension],
  [MSG.ADD_IDENTITY, refused('add_identity', KEYS_ARE_THE_VAULTS)],
  [MSG.ADD_ID_CONSTRAINED, refused('add_identity', KEYS_ARE_THE_VAULTS)],
  [MSG.REMOVE_IDENTITY, refused('remove_identity', KEYS_ARE_THE_VAULTS)],
  [MSG.REMOVE_ALL_IDENTITIES, refused('remove_all', KEYS_ARE_THE_VAULTS)],
  [MSG.ADD_SMARTCARD_KEY, refused('add_smartcard_key', KEYS_ARE_THE_VAULTS)],
  [MSG.ADD_SMARTCARD_KEY_CONSTRAINED, refused('add_smartcard_key', KEYS_ARE_THE_VAULTS)],
  [MSG.REMOVE_SMARTCARD_KEY, refused('remove_smartcard_key', KEYS_ARE_THE_VAULTS)],
  [MSG.LOCK, refused('lock', 'the keys are locked with the vault: use `postern lock`')],
  [MSG.UNLOCK, refused('unlock', 'the keys are unlocked with the vault: use `postern unlock`')],
]);

export function unknownMessage(type: number): Handler {
  return refused(`unknown ${type}`, `postern's ssh-agent does not know message type ${type}`, 'bad_request');
}

export { FAILURE };
