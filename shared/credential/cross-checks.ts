// Checks that span a definition's fields, on the raw input.
import { quote } from './text';
import { checkDefaultHeaderName, HEADERS_MAX } from './fields';
import { credentialHeaderRows, forbiddenHeader, headerKey } from '../http-headers';
import { TomlFloat } from './shape';
import { Found } from './problems';
import { checkPermissionName } from './computed-fields';

// The injection forms, as written in [inject] (SPEC §4, §13).
const INJECT_FORMS = ['header', 'basic_user', 'query', 'aws_sigv4', 'github_app', 'oauth2'] as const;

export function isTable(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Date) && !(v instanceof TomlFloat);
}

export function own(obj: Record<string, unknown>, key: string): unknown {
  return Object.prototype.hasOwnProperty.call(obj, key) ? obj[key] : undefined;
}

// Checks that span fields, on the raw input, so that they run even when
// other fields have problems. Each only looks at values of the right type.
export function httpCrossChecks(raw: Record<string, unknown>): Found[] {
  const problems: Found[] = [];
  const inject = own(raw, 'inject');
  if (isTable(inject)) {
    const forms = INJECT_FORMS.filter((k) => own(inject, k) !== undefined);
    if (forms.length !== 1) {
      problems.push({
        at: ['inject'],
        message: `exactly one of ${INJECT_FORMS.join(', ')} must be set${forms.length > 1 ? ` (found ${forms.join(', ')})` : ' (found none)'}`,
      });
    }
    const app = own(inject, 'github_app');
    const permissions = isTable(app) ? own(app, 'permissions') : undefined;
    if (isTable(permissions))
      for (const name of Object.keys(permissions)) {
        const r = checkPermissionName(name);
        if (!r.ok) problems.push({ at: ['inject', 'github_app', 'permissions', name], message: r.problem });
      }
    const hasTemplate = own(inject, 'template') !== undefined;
    if (forms.includes('header') && !hasTemplate) {
      problems.push({
        at: ['inject', 'template'],
        message: 'is required with header: e.g. template = "Bearer {secret}"',
      });
    }
    if (hasTemplate && !forms.includes('header')) {
      problems.push({ at: ['inject', 'template'], message: 'is only used with header; remove it, or add header' });
    }
  }
  problems.push(...headerProblems(raw), ...envDuplicates(raw));
  const credentialApprove = own(raw, 'approve') ?? 'session';
  const allow = own(raw, 'allow');
  if (credentialApprove === 'each-use' && Array.isArray(allow)) {
    allow.forEach((rule, i) => {
      if (isTable(rule) && own(rule, 'approve') === 'session') {
        problems.push({
          at: ['allow', i, 'approve'],
          message:
            '"session" is weaker than the credential\'s approve = "each-use"; a rule may only be stricter: remove it or write "each-use"',
        });
      }
    });
  }
  return problems;
}

// ssh_agent offers a key to OpenSSH clients, so there must be a key.
export function sshCrossChecks(raw: Record<string, unknown>): Found[] {
  if (own(raw, 'ssh_agent') === true && own(raw, 'auth') === 'password')
    return [
      {
        at: ['ssh_agent'],
        message:
          'needs auth = "key": the ssh-agent front door offers a key, and a password cannot be offered that way; remove ssh_agent, or store a key',
      },
    ];
  return [];
}

// [headers] names: valid, not managed by postern, not the header the
// credential injects into, and each once (case and "_" against "-" aside).
function headerProblems(raw: Record<string, unknown>): Found[] {
  const headers = own(raw, 'headers');
  if (!isTable(headers)) return [];
  const problems: Found[] = [];
  const names = Object.keys(headers);
  if (names.length > HEADERS_MAX)
    problems.push({ at: ['headers'], message: `must list at most ${HEADERS_MAX} headers` });
  const inject = own(raw, 'inject');
  const injectInto =
    isTable(inject) && typeof own(inject, 'header') === 'string'
      ? { header: own(inject, 'header') as string, template: '' }
      : isTable(inject) && own(inject, 'basic_user') !== undefined
        ? { basic_user: '' }
        : { query: '' };
  const rows = credentialHeaderRows({ name: String(own(raw, 'name') ?? 'this'), inject: injectInto });
  const seen = new Map<string, string>();
  for (const name of names) {
    const r = checkDefaultHeaderName(name);
    if (!r.ok) {
      problems.push({ at: ['headers', name], message: r.problem });
      continue;
    }
    const row = forbiddenHeader(name, rows);
    if (row) problems.push({ at: ['headers', name], message: `cannot be set: ${row.reason}; remove it` });
    const key = headerKey(name);
    const before = seen.get(key);
    if (before !== undefined)
      problems.push({
        at: ['headers', name],
        message: `is the same header as ${quote(before)} (names are case-insensitive, and servers read "_" as "-"); keep one`,
      });
    else seen.set(key, name);
  }
  return problems;
}

// `env` names each variable once: two credentials may share one (the run
// says which wins), one credential naming it twice is a slip.
function envDuplicates(raw: Record<string, unknown>): Found[] {
  const env = own(raw, 'env');
  if (!Array.isArray(env)) return [];
  const problems: Found[] = [];
  env.forEach((name, i) => {
    if (typeof name === 'string' && env.indexOf(name) < i)
      problems.push({ at: ['env', i], message: `${quote(name)} is listed twice; keep one` });
  });
  return problems;
}
