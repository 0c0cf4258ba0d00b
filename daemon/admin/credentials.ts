// `postern cred add|update|rm|list|show`: credentials in the vault. Every
// change proves the passphrase and goes through the journal bracket.
import { Refusal } from '../../shared/errors';
import {
  CredentialDef,
  validateDefinition,
  definitionHash,
  diffDefinitions,
  checkHttpSecret,
  prepareSshSecret,
  summariseTargets,
} from '../../shared/credential';
import type { StoredCredential } from '../vault/unlocked-vault';
import type { AdminContext } from './context';
import { prove } from './proof';

// What kind of secret an HTTP definition holds.
function secretShape(def: CredentialDef | null): string {
  if (!def || def.kind !== 'http') return 'sent';
  if ('aws_sigv4' in def.inject) return 'aws_sigv4';
  if ('github_app' in def.inject) return 'github_app';
  if ('oauth2' in def.inject) return `oauth2 ${def.inject.oauth2.grant}`;
  return 'sent';
}

function checkSecret(def: CredentialDef, secret: Buffer): void {
  if (def.kind === 'http') checkHttpSecret(secret, def.inject);
  else {
    const prepared = prepareSshSecret(def, secret);
    if (prepared !== secret) prepared.fill(0);
  }
}

function notFound(ctx: AdminContext, name: string): Refusal {
  return new Refusal('not_found', `${ctx.state.requireUnlocked().noSuchCredential(name)}; see \`postern cred list\``);
}

// Gone between the first look and the proof.
function goneMeanwhile(name: string): Refusal {
  return new Refusal('not_found', `no credential named "${name}"; see \`postern cred list\``);
}

export async function credAdd(
  ctx: AdminContext,
  passphrase: Buffer,
  definition: unknown,
  secret: Buffer,
): Promise<Record<string, unknown>> {
  const def = validateDefinition(definition);
  checkSecret(def, secret);
  const vault = await prove(ctx, passphrase);
  if (vault.credential(def.name))
    throw new Refusal(
      'conflict',
      `a credential named "${def.name}" exists; use \`postern cred update ${def.name}\` or choose another name`,
    );
  const now = new Date().toISOString();
  const hash = definitionHash(def);
  const sealed = vault.sealSecret(secret);
  await ctx.writes.write(
    vault,
    { kind: 'cred_add', credential: def.name, credential_kind: def.kind, definition_hash: hash },
    (m) =>
      m.set(def.name, {
        entry: {
          name: def.name,
          kind: def.kind,
          definition: { ...def },
          definition_hash: hash,
          created_at: now,
          updated_at: now,
        },
        secret: sealed,
        definition: def,
        problem: null,
      }),
  );
  return { name: def.name, definition_hash: hash, generation: vault.generation };
}

export async function credUpdate(
  ctx: AdminContext,
  passphrase: Buffer,
  name: string,
  definition: unknown,
  secret: Buffer | undefined,
): Promise<Record<string, unknown>> {
  const def = validateDefinition(definition);
  if (def.name !== name)
    throw new Refusal(
      'bad_request',
      `the definition is named "${def.name}" but the command names "${name}"; renaming is not supported: add a new credential and remove the old one`,
    );
  const existing = ctx.state.requireUnlocked().credential(name);
  if (!existing) throw notFound(ctx, name);
  if (existing.entry.kind !== def.kind)
    throw new Refusal(
      'bad_request',
      `"${name}" is an ${existing.entry.kind} credential; its kind cannot change: add a new credential instead`,
    );
  if (secret) checkSecret(def, secret);
  else if (def.kind === 'ssh' && (existing.entry.definition as { auth?: string }).auth !== def.auth) {
    throw new Refusal('bad_request', `changing auth of "${name}" needs a new secret; pass --secret-file`);
  } else if (def.kind === 'http' && secretShape(existing.definition) !== secretShape(def)) {
    // A token, an AWS key pair and an app's PEM key are different secrets.
    throw new Refusal(
      'bad_request',
      `changing what "${name}" does with its secret (${secretShape(existing.definition)} → ${secretShape(def)}) needs a new secret of that shape; pass --secret-file`,
    );
  }
  const vault = await prove(ctx, passphrase);
  const current = vault.credential(name);
  if (!current) throw goneMeanwhile(name);
  const hash = definitionHash(def);
  const sealed = secret ? vault.sealSecret(secret) : current.secret;
  const changes = current.definition ? diffDefinitions(current.definition, def) : [];
  await ctx.writes.write(
    vault,
    {
      kind: 'cred_update',
      credential: name,
      definition_hash: hash,
      previous_definition_hash: current.entry.definition_hash,
      secret_replaced: Boolean(secret),
    },
    (m) =>
      m.set(name, {
        entry: {
          ...current.entry,
          definition: { ...def },
          definition_hash: hash,
          updated_at: new Date().toISOString(),
        },
        // Without a new secret, the one stored when the write runs: a refresh
        // token rotated while this update waited is kept, not undone.
        secret: secret ? sealed : (m.get(name)?.secret ?? sealed),
        definition: def,
        problem: null,
      }),
  );
  if (hash !== current.entry.definition_hash) ctx.approvals.credentialGone(name, 'changed');
  ctx.credentialChanges.emit({ name, former: current });
  return { name, definition_hash: hash, secret_replaced: Boolean(secret), changes, generation: vault.generation };
}

export async function credRemove(
  ctx: AdminContext,
  passphrase: Buffer,
  name: string,
): Promise<Record<string, unknown>> {
  if (!ctx.state.requireUnlocked().credential(name)) throw notFound(ctx, name);
  const vault = await prove(ctx, passphrase);
  const current = vault.credential(name);
  if (!current) throw goneMeanwhile(name);
  await ctx.writes.write(
    vault,
    {
      kind: 'cred_rm',
      credential: name,
      credential_kind: current.entry.kind,
      definition_hash: current.entry.definition_hash,
    },
    (m) => m.delete(name),
  );
  ctx.sessions.endForCredential(name, 'credential_removed');
  ctx.approvals.credentialGone(name, 'removed');
  ctx.credentialChanges.emit({ name, former: current });
  return { name, removed: true, generation: vault.generation };
}

export function credList(ctx: AdminContext): Record<string, unknown> {
  const vault = ctx.state.requireUnlocked();
  return { credentials: vault.credentials().map((c) => describeCredential(c)) };
}

export function credShow(ctx: AdminContext, name: string): Record<string, unknown> {
  const c = ctx.state.requireUnlocked().credential(name);
  if (!c) throw notFound(ctx, name);
  return { ...describeCredential(c), definition: c.entry.definition };
}

export function describeCredential(c: StoredCredential): Record<string, unknown> {
  const { entry, definition: def } = c;
  return {
    name: entry.name,
    kind: entry.kind,
    description: def?.description ?? '',
    // A definition that no longer validates shows no targets, and says why.
    ...(def ? { targets: summariseTargets(def) } : { targets: [], problem: c.problem }),
    definition_hash: entry.definition_hash,
    created_at: entry.created_at,
    updated_at: entry.updated_at,
  };
}
