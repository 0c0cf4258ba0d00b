// The rule for a signature (SPEC §12): only a user authentication request
// for the session this connection bound itself to, to a server whose host
// key is the credential's pin, for the credential's user and key, on a
// connection no forwarded agent was bound through. Each check is a
// refusal naming what was wrong; nothing here opens a secret.
import { Refusal } from '../../shared/errors';
import type { SshCredentialDef } from '../../shared/credential';
import type { ConnectionBindings, Binding } from './bindings';
import { fingerprintOf } from './agent-keys';
import { parseUserauthRequest, type UserauthRequest } from './userauth';

export interface SignAllowed {
  binding: Binding;
  login: UserauthRequest;
  hostKey: string; // fingerprint of the bound host key
}

const deny = (message: string): Refusal => new Refusal('denied_policy', message);

// What a sign request says, read whether or not it passes: the host key the
// connection is bound to and the user the login is for, for the journal.
export function signRequestFacts(
  bindings: ConnectionBindings,
  data: Buffer,
): { hostKey: string | null; user: string | null } {
  const binding = bindings.current;
  return {
    hostKey: binding ? fingerprintOf(binding.hostKey) : null,
    user: parseUserauthRequest(data)?.user ?? null,
  };
}

export function checkSignRequest(
  def: SshCredentialDef,
  bindings: ConnectionBindings,
  data: Buffer,
  keyBlob: Buffer,
): SignAllowed {
  if (bindings.forwarded)
    throw deny(
      `this agent connection was forwarded to another host (ssh -A); postern signs only on the machine the daemon runs on, for a session it saw bound: connect from here to ${def.host} instead of forwarding the agent`,
    );
  const binding = bindings.current;
  if (!binding)
    throw deny(
      'this agent connection did not bind itself to an SSH session (session-bind@openssh.com, sent by OpenSSH 8.9 and later); postern signs only for a bound session: use OpenSSH 8.9 or later',
    );
  const hostKey = fingerprintOf(binding.hostKey);
  if (hostKey !== def.host_key)
    throw new Refusal(
      'host_key_mismatch',
      `the server this connection is bound to has host key ${hostKey}, not ${def.host_key}, the pin of credential "${def.name}"; its key signs only logins to that server`,
    );
  const login = parseUserauthRequest(data);
  if (!login)
    throw deny(
      'the data to sign is not an SSH public-key user authentication request; postern signs nothing else with an SSH credential',
    );
  if (!login.sessionId.equals(binding.sessionId))
    throw deny('the data to sign is for another SSH session than the one this connection is bound to');
  if (login.hostKey && !login.hostKey.equals(binding.hostKey))
    throw deny('the data to sign names another server host key than the one this connection is bound to');
  if (!login.keyBlob.equals(keyBlob))
    throw deny('the data to sign offers another public key than the one asked to sign with');
  if (login.user !== def.user)
    throw deny(
      `the login is for user "${login.user}", but credential "${def.name}" logs in only as "${def.user}"; connect as ${def.user}`,
    );
  return { binding, login, hostKey };
}
