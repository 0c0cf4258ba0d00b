// What a definition allows beyond its own rules, said before the human
// authorises it (SPEC §12: `ssh_agent = true` is a widening stated openly).
import type { CredentialDef } from './types';

export function wideningNotes(def: CredentialDef): string[] {
  if (def.kind !== 'ssh' || def.ssh_agent !== true) return [];
  return [
    `ssh_agent = true: this key is also offered to ssh and git through the ssh-agent front door (SSH_AUTH_SOCK). ` +
      `There the client chooses what runs once logged in, so \`commands\` and \`stdin\` do not apply; postern still signs only ` +
      `a login as "${def.user}" to the server whose host key is ${def.host_key}, after approval. Where that matters, ` +
      `limit the key on the server: restrict,command="…" before it in ~${def.user}/.ssh/authorized_keys.`,
  ];
}
