// What a credential held before a change: the version a `cred update` or a
// `cred rm` replaced (not a refresh token the server rotated: rotation
// spends it). A host may keep a value it was sent and show it to a later
// request, and a replaced value may still be valid at its service until
// someone revokes it there; so until the lock, responses from what a former
// version covered are searched for its values too (docs/responses.md,
// "Former values").
//
// Kept as the vault keeps its secrets, sealed under the unlocked instance's
// key (unreadable once it locks), with the definition that said where the
// value went. The last MAX_FORMER versions of each name; the older ones go.
import type { CredentialDef } from '../../shared/credential';
import type { SealedSecret } from '../vault/sealed-secrets';

export const MAX_FORMER = 4;

export interface FormerVersion {
  // Unique for the daemon's life: the key of its redactor in RedactorCache,
  // which no credential name can take (names have no '#').
  readonly key: string;
  readonly definition: CredentialDef;
  readonly secret: SealedSecret;
}

export class FormerValues {
  private seq = 0;
  private readonly byName = new Map<string, FormerVersion[]>();

  // Returns the keys of the versions that no longer fit, for the caller to
  // drop their redactors.
  keep(definition: CredentialDef, secret: SealedSecret): string[] {
    const name = definition.name;
    const list = this.byName.get(name) ?? [];
    list.unshift({ key: `former#${++this.seq}#${name}`, definition, secret });
    this.byName.set(name, list);
    return list.splice(MAX_FORMER).map((v) => v.key);
  }

  // Newest first within a name.
  versions(): FormerVersion[] {
    return [...this.byName.values()].flat();
  }

  get size(): number {
    let n = 0;
    for (const list of this.byName.values()) n += list.length;
    return n;
  }

  // At lock: the sealed secrets are unreadable by then anyway.
  clear(): void {
    this.byName.clear();
  }
}
