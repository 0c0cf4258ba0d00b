// POST /v1/runs (SPEC §11): placeholders for the proxy front door, bound to
// the calling process instance. No approval is asked: a placeholder is
// worthless outside the run's process tree, and every request that carries
// one is approved like any other. The run is journaled before its
// placeholders are returned.
//
// Body: {"credentials": ["name", ...]}, optional; absent, empty, or an
// empty body: every HTTP credential (in name order). Names are each given
// once; an unknown one is `unknown_credential`, an SSH one `bad_request`.
import { Refusal, Problem, formatProblems } from '../shared/errors';
import { NAME_PATTERN } from '../shared/credential/fields';
import { quote } from '../shared/credential/text';
import type { HttpCredentialDef } from '../shared/credential';
import type { RunsReply } from '../shared/protocol';
import type { Identity } from './identity/identify';
import type { PipelineServices } from './pipeline/context';
import type { Run } from './stores/runs';
import { usableDefinition, UnlockedVault } from './vault/unlocked-vault';

const FIELDS = ['credentials'] as const;
// More names than any vault holds is a mistake, not a request.
const MAX_NAMES = 256;

function badRequest(problems: readonly Problem[]): Refusal {
  return new Refusal('bad_request', formatProblems(problems), { problems: problems.map((p) => ({ ...p })) });
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

// The names asked for, or null for "every HTTP credential".
export function parseRunsBody(raw: Buffer): string[] | null {
  if (raw.length === 0) return null;
  let value: unknown;
  try {
    value = JSON.parse(utf8.decode(raw));
  } catch {
    throw new Refusal(
      'bad_request',
      'the request body is not valid UTF-8 JSON; send one JSON object, e.g. {"credentials": ["github"]}, or no body for every HTTP credential',
    );
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new Refusal('bad_request', 'the request body must be a JSON object, e.g. {"credentials": ["github"]}');
  const problems: Problem[] = Object.keys(value)
    .filter((k) => !(FIELDS as readonly string[]).includes(k))
    .map((k) => ({ path: quote(k, 40), message: `unknown field; remove it (the fields are ${FIELDS.join(', ')})` }));
  const names = (value as Record<string, unknown>)['credentials'];
  const list = names === undefined ? null : checkNames(names, problems);
  if (problems.length > 0) throw badRequest(problems);
  return list && list.length > 0 ? list : null;
}

function checkNames(names: unknown, problems: Problem[]): string[] {
  if (!Array.isArray(names)) {
    problems.push({ path: 'credentials', message: 'must be a list of credential names, e.g. ["github"]' });
    return [];
  }
  if (names.length > MAX_NAMES) {
    problems.push({ path: 'credentials', message: `must list at most ${MAX_NAMES} names` });
    return [];
  }
  names.forEach((n, i) => {
    const path = `credentials[${i}]`;
    if (typeof n !== 'string') problems.push({ path, message: 'must be a string naming a credential, e.g. "github"' });
    else if (!NAME_PATTERN.test(n))
      problems.push({
        path,
        message: `${quote(n)} is not a credential name (1 to 64 of a-z, 0-9, ".", "_", "-"); GET /v1/credentials lists them`,
      });
    else if (names.indexOf(n) < i) problems.push({ path, message: `${quote(n)} is named twice; name it once` });
  });
  return names as string[];
}

// The HTTP definitions asked for, in the order named.
function definitionsOf(vault: UnlockedVault, names: string[] | null): HttpCredentialDef[] {
  if (names === null) {
    return vault
      .credentials()
      .filter((c) => c.entry.kind === 'http' && c.definition !== null)
      .map((c) => c.definition as HttpCredentialDef);
  }
  return names.map((name) => {
    const stored = vault.credential(name);
    if (!stored) throw new Refusal('unknown_credential', `${vault.noSuchCredential(name)}; see GET /v1/credentials`);
    if (stored.entry.kind !== 'http')
      throw new Refusal(
        'bad_request',
        `credentials: "${name}" is an ${stored.entry.kind} credential; placeholders are for HTTP credentials only (use POST /v1/ssh for it)`,
      );
    return usableDefinition(stored) as HttpCredentialDef;
  });
}

// Each variable to the first credential that names it; the others listed.
function envOf(defs: readonly HttpCredentialDef[], run: Run): Pick<RunsReply, 'env' | 'conflicts'> {
  const env: Record<string, string> = {};
  const owner = new Map<string, string>();
  const conflicts: RunsReply['conflicts'] = [];
  for (const def of defs) {
    for (const variable of def.env ?? []) {
      const first = owner.get(variable);
      if (first === undefined) {
        owner.set(variable, def.name);
        env[variable] = run.placeholders.get(def.name) as string;
        continue;
      }
      const known = conflicts.find((c) => c.variable === variable);
      if (known) known.ignored.push(def.name);
      else conflicts.push({ variable, credential: first, ignored: [def.name] });
    }
  }
  return { env, conflicts };
}

export async function createRun(s: PipelineServices, identity: Identity, raw: Buffer): Promise<RunsReply> {
  const names = parseRunsBody(raw);
  const defs = definitionsOf(s.vault(), names);
  const run = s.stores.runs.create(
    identity,
    defs.map((d) => ({ name: d.name, env: d.env ?? [] })),
  );
  const root = run.root;
  const epoch = s.lockEpoch();
  let head: { seq: number };
  try {
    head = await s.journal.record({
      kind: 'run_start',
      run: run.id,
      root_pid: root.pid,
      root_exe: root.exe,
      root_instance: root.key,
      credentials: [...run.placeholders.keys()],
    });
  } catch (e) {
    s.stores.runs.discard(run.id);
    throw e;
  }
  // Locked while the start was written: the lock ended the run already.
  if (s.lockEpoch() !== epoch) s.vault();
  return {
    run: run.id,
    placeholders: Object.fromEntries(run.placeholders),
    ...envOf(defs, run),
    audit_seq: head.seq,
    ssh_agent_socket: s.config().ssh.ssh_agent_socket || null,
  };
}
