// Which HTTP credentials' rules cover a host and port over https (some
// `[[allow]]` rule names the host, the scheme and the port): a CONNECT to
// such a target is terminated and its requests read; any other goes by
// proxy.other_hosts. Method and path are judged per request, later.
import type { HttpCredentialDef } from '../../shared/credential';
import { hostPatternMatches } from '../../shared/host-pattern';
import type { PipelineServices } from './context';
import type { Target } from './target';
import { usableDefinition } from '../vault/unlocked-vault';
import type { FormerVersion } from '../stores/former-values';

export function httpDefinitions(s: PipelineServices): HttpCredentialDef[] {
  const defs: HttpCredentialDef[] = [];
  for (const stored of s.vault().credentials()) {
    if (stored.entry.kind !== 'http') continue;
    try {
      const def = usableDefinition(stored);
      if (def.kind === 'http') defs.push(def);
    } catch {
      // a definition that no longer validates covers nothing
    }
  }
  return defs;
}

function covers(def: HttpCredentialDef, t: Target): boolean {
  return def.allow.some(
    (rule) => hostPatternMatches(rule.host, t.host) && rule.schemes.includes(t.scheme) && rule.ports.includes(t.port),
  );
}

export function coveringCredentials(s: PipelineServices, t: Target): HttpCredentialDef[] {
  return httpDefinitions(s).filter((def) => covers(def, t));
}

// The former versions (stores/former-values.ts) whose definition covered
// the host and redacted its responses: their values are searched for in
// what the host answers now. They decide nothing else (a host only a
// removed credential covered is tunnelled or refused like any other).
export function formerCovering(s: PipelineServices, t: Target): FormerVersion[] {
  if (s.stores.former.size === 0) return [];
  return s.stores.former
    .versions()
    .filter((v) => v.definition.kind === 'http' && v.definition.redact_response && covers(v.definition, t));
}
