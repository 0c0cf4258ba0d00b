// The keys the ssh-agent front door offers: those of SSH credentials with
// `ssh_agent = true` (SPEC §12), each with its public key blob. The blob is
// derived from the stored private key once per stored secret (a replaced
// secret is a new sealed object, so its blob is derived again).
import type { SshCredentialDef } from '../../shared/credential';
import type { UnlockedVault, StoredCredential } from '../vault/unlocked-vault';
import { publicBlobOf } from './agent-keys';

export interface AgentCredential {
  def: SshCredentialDef;
  blob: Buffer;
}

const blobs = new WeakMap<object, Buffer>();

function agentDefinition(c: StoredCredential): SshCredentialDef | null {
  const d = c.definition;
  return d && d.kind === 'ssh' && d.auth === 'key' && d.ssh_agent === true ? d : null;
}

async function blobOf(vault: UnlockedVault, c: StoredCredential, def: SshCredentialDef): Promise<Buffer> {
  const known = blobs.get(c.secret);
  if (known) return known;
  const blob = await vault.withCredentialSecret(def, async (secret) => publicBlobOf(secret.bytes));
  blobs.set(c.secret, blob);
  return blob;
}

// In name order. A key that cannot be read is left out (the daemon log
// says which); the others are still offered.
export async function agentCredentials(
  vault: UnlockedVault,
  onUnreadable: (name: string, e: unknown) => void,
): Promise<AgentCredential[]> {
  const out: AgentCredential[] = [];
  for (const c of vault.credentials()) {
    const def = agentDefinition(c);
    if (!def) continue;
    try {
      out.push({ def, blob: await blobOf(vault, c, def) });
    } catch (e) {
      onUnreadable(def.name, e);
    }
  }
  return out;
}
