// SPEC §6.1 step 2: the named credential exists, is of the endpoint's kind,
// and its stored definition still validates (checked at unlock; one that
// does not refuses only its own requests, naming the fix).
import { Refusal } from '../../shared/errors';
import type { CredentialDef, HttpCredentialDef, SshCredentialDef } from '../../shared/credential';
import { usableDefinition } from '../vault/unlocked-vault';
import type { PipelineServices } from './context';

const OTHER_ENDPOINT = { http: 'POST /v1/ssh', ssh: 'POST /v1/http' } as const;

export function credentialOfKind(s: PipelineServices, name: string, kind: 'http'): HttpCredentialDef;
export function credentialOfKind(s: PipelineServices, name: string, kind: 'ssh'): SshCredentialDef;
export function credentialOfKind(s: PipelineServices, name: string, kind: CredentialDef['kind']): CredentialDef {
  const vault = s.vault();
  const stored = vault.credential(name);
  if (!stored) throw new Refusal('unknown_credential', `${vault.noSuchCredential(name)}; see GET /v1/credentials`);
  if (stored.entry.kind !== kind)
    throw new Refusal(
      'bad_request',
      `credential "${name}" is an ${stored.entry.kind} credential; use ${OTHER_ENDPOINT[kind]}`,
    );
  const def = usableDefinition(stored);
  if (def.kind !== kind)
    throw new Refusal(
      'internal_error',
      `the stored definition of credential "${name}" is not of its kind; a human must fix it with \`postern cred update ${name}\``,
    );
  return def;
}
