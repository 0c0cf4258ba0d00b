// Validation of a credential definition as a whole: the zod schemas of its
// shape (shape.ts), the checks that span fields (cross-checks.ts), and the
// rebuild into the normalised definition (build.ts). Every problem is
// collected and reported at once, each with its path, because a refusal that
// names only the first problem makes the author go round in circles.
import { Problem, Refusal, formatProblems } from '../errors';
import { CredentialDef } from './types';
import { commonSchema, describeValue, errorMap, httpSchema, sshSchema } from './shape';
import { Found, issueProblems, REQUIRED_HINTS, sortedProblems } from './problems';
import { httpCrossChecks, isTable, own, sshCrossChecks } from './cross-checks';
import { buildHttp, buildSsh } from './build';

export { LIMITS, TomlFloat } from './shape';
export { formatPath } from './problems';

export type Validation = { ok: true; def: CredentialDef } | { ok: false; problems: Problem[] };

// Every problem of a definition, or the normalised definition.
export function checkDefinition(input: unknown): Validation {
  if (!isTable(input))
    return { ok: false, problems: [{ path: '', message: 'must be a table of keys (a TOML document)' }] };
  const kind = own(input, 'kind');
  const options = { error: errorMap, reportInput: true } as const;
  if (kind === 'http') {
    const r = httpSchema.safeParse(input, options);
    const found = [
      ...(r.success ? [] : r.error.issues.flatMap((i) => issueProblems(i, 'http'))),
      ...httpCrossChecks(input),
    ];
    if (found.length || !r.success) return { ok: false, problems: sortedProblems(found, 'http') };
    return { ok: true, def: buildHttp(r.data) };
  }
  if (kind === 'ssh') {
    const r = sshSchema.safeParse(input, options);
    const found = [
      ...(r.success ? [] : r.error.issues.flatMap((i) => issueProblems(i, 'ssh'))),
      ...sshCrossChecks(input),
    ];
    if (found.length || !r.success) return { ok: false, problems: sortedProblems(found, 'ssh') };
    return { ok: true, def: buildSsh(r.data) };
  }
  const kindProblem: Found =
    kind === undefined
      ? { at: ['kind'], message: `is required: ${REQUIRED_HINTS['kind']}` }
      : { at: ['kind'], message: `must be "http" or "ssh", not ${describeValue(kind)}` };
  const r = commonSchema.safeParse(input, options);
  const found = [kindProblem, ...(r.success ? [] : r.error.issues.flatMap((i) => issueProblems(i, null)))];
  return { ok: false, problems: sortedProblems(found, null) };
}

export const DEFAULT_SOURCE = 'credential definition';

export function definitionRefusal(source: string, problems: readonly Problem[]): Refusal {
  const n = problems.length;
  return new Refusal(
    'invalid_definition',
    `${source}: ${n} problem${n === 1 ? '' : 's'}: ${formatProblems(problems)}; fix the definition and run the command again`,
    { problems: problems.map((p) => ({ ...p })) },
  );
}

export function validateDefinition(input: unknown, source: string = DEFAULT_SOURCE): CredentialDef {
  const r = checkDefinition(input);
  if (!r.ok) throw definitionRefusal(source, r.problems);
  return r.def;
}
