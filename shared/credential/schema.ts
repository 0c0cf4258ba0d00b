// Validation of a credential definition as a whole: zod schemas for the
// shape (strict: unknown keys are problems), the field checks of fields.ts
// wired to their paths, the checks that span fields, and the rebuild into
// the normalised definition. Every problem is collected and reported at
// once, each with its path, because a refusal that names only the first
// problem makes the author go round in circles.
import { z } from 'zod';
import { Problem, Refusal, formatProblems } from '../errors';
import { validateCommandRule } from '../command-rule';
import { parseHostPattern, parseSshHost } from '../host-pattern';
import { Check, ok, bad, quote } from './text';
import { closest } from '../suggest';
import {
  checkName,
  checkDescription,
  checkRate,
  checkCidr,
  checkHeaderName,
  checkTemplate,
  checkBasicUser,
  checkQueryName,
  checkMethod,
  checkPathRule,
  checkHostKey,
  checkSshUser,
  checkDefaultHeaderName,
  checkDefaultHeaderValue,
  HEADERS_MAX,
} from './fields';
import { credentialHeaderRows, forbiddenHeader, headerKey } from '../http-headers';
import {
  Approve,
  CredentialDef,
  HttpCredentialDef,
  HttpInject,
  HttpAllowRule,
  HttpScheme,
  SshCredentialDef,
  HTTP_KEYS,
  SSH_KEYS,
  INJECT_KEYS,
  ALLOW_RULE_KEYS,
  stricterApprove,
} from './types';

// Limits on list sizes: a definition is read by a person before approval,
// and policy matching walks these lists on every request.
export const LIMITS = { allow: 100, paths: 100, methods: 32, ports: 64, commands: 100, allow_addresses: 100 } as const;

// TOML floats are kept apart from integers (JSON cannot tell 443.0 from
// 443, TOML can), so "port = 22.0" is reported as a float, not accepted.
export class TomlFloat {
  constructor(readonly value: number) {}
}

function describeValue(v: unknown): string {
  if (v instanceof TomlFloat) return `the float ${v.value}`;
  if (typeof v === 'bigint') return `the integer ${v}`;
  if (typeof v === 'number') return Number.isInteger(v) ? `${v}` : `the float ${v}`;
  if (typeof v === 'string') return `the string ${quote(v, 30)}`;
  if (typeof v === 'boolean') return `${v}`;
  if (Array.isArray(v)) return 'a list';
  if (v === null) return 'null';
  if (v instanceof Date) return 'a date';
  if (typeof v === 'object') return 'a table';
  return typeof v;
}

const EXPECTED: Readonly<Record<string, string>> = {
  string: 'a string',
  number: 'an integer',
  int: 'an integer',
  boolean: 'true or false',
  array: 'a list',
  object: 'a table',
  record: 'a table',
};

// Messages for zod's own issues, from the raw issue (which carries the input).
const errorMap: z.core.$ZodErrorMap = (iss) => {
  if (iss.input === undefined && (iss.code === 'invalid_type' || iss.code === 'invalid_value')) return 'is required';
  switch (iss.code) {
    case 'invalid_type':
      return `must be ${EXPECTED[iss.expected] ?? iss.expected}, not ${describeValue(iss.input)}`;
    case 'invalid_value':
      return `must be ${iss.values.map((v) => JSON.stringify(v)).join(' or ')}, not ${describeValue(iss.input)}`;
    case 'too_small':
      if (iss.origin === 'array')
        return Number(iss.minimum) <= 1 ? 'must list at least one entry' : `must list at least ${iss.minimum} entries`;
      return `must be at least ${iss.minimum}, not ${describeValue(iss.input)}`;
    case 'too_big':
      if (iss.origin === 'array') return `must list at most ${iss.maximum} entries`;
      return `must be at most ${iss.maximum}, not ${describeValue(iss.input)}`;
    default:
      return undefined;
  }
};

// A string field normalised by one of the Check functions.
function checked<T>(check: (value: string) => Check<T>) {
  return z.string().transform((value, ctx) => {
    const r = check(value);
    if (r.ok) return r.value;
    ctx.issues.push({ code: 'custom', message: r.problem, input: value });
    return z.NEVER;
  });
}

function integerIn(min: number, max: number) {
  const error = (iss: { input?: unknown }) =>
    iss.input === undefined ? undefined : `must be an integer from ${min} to ${max}, not ${describeValue(iss.input)}`;
  return z.number({ error }).int({ error }).min(min, { error }).max(max, { error });
}

const approveSchema = z.enum(['session', 'each-use']);
const portSchema = integerIn(1, 65535);

const commonShape = {
  name: checked(checkName),
  description: checked(checkDescription).default(''),
  approve: approveSchema.default('session'),
  allow_addresses: z
    .array(checked(checkCidr))
    .max(LIMITS.allow_addresses)
    .default(() => []),
};

const injectSchema = z.strictObject({
  header: checked(checkHeaderName).optional(),
  template: checked(checkTemplate).optional(),
  basic_user: checked(checkBasicUser).optional(),
  query: checked(checkQueryName).optional(),
});

const ruleSchema = z.strictObject({
  host: checked((v) => {
    const r = parseHostPattern(v);
    return r.ok ? ok(r.value.host) : r;
  }),
  schemes: z
    .array(z.enum(['http', 'https']))
    .min(1)
    .max(2)
    .default(() => ['https' as const]),
  ports: z.array(portSchema).min(1).max(LIMITS.ports).optional(),
  methods: z
    .array(checked(checkMethod))
    .min(1)
    .max(LIMITS.methods)
    .default(() => ['GET']),
  paths: z
    .array(checked(checkPathRule))
    .min(1)
    .max(LIMITS.paths)
    .default(() => ['/*']),
  approve: approveSchema.optional(),
});

const httpSchema = z.strictObject({
  ...commonShape,
  kind: z.literal('http'),
  redact_response: z.boolean().default(true),
  pass_set_cookie: z.boolean().default(false),
  rate: checked(checkRate).optional(),
  // Names are checked in httpCrossChecks (each problem at its own path).
  headers: z.record(z.string(), checked(checkDefaultHeaderValue)).optional(),
  inject: injectSchema,
  allow: z.array(ruleSchema).min(1).max(LIMITS.allow),
});

const sshSchema = z.strictObject({
  ...commonShape,
  kind: z.literal('ssh'),
  host: checked((v) => {
    const r = parseSshHost(v);
    return r.ok ? ok(r.value.host) : r;
  }),
  port: portSchema.default(22),
  user: checked(checkSshUser),
  auth: z.enum(['key', 'password']),
  host_key: checked(checkHostKey),
  commands: z
    .array(
      checked((v) => {
        const problem = validateCommandRule(v);
        return problem === null ? ok(v) : bad(problem);
      }),
    )
    .min(1)
    .max(LIMITS.commands),
  stdin: z.boolean().default(false),
});

// Used when `kind` is missing or unknown: the fields both kinds share are
// still checked, so their problems are reported in the same round.
const commonSchema = z.object(commonShape);

// Hints appended to "is required", by key.
const REQUIRED_HINTS: Readonly<Record<string, string>> = {
  name: 'the name agents use, e.g. name = "github"',
  kind: 'kind = "http" or kind = "ssh"',
  inject: 'add an [inject] table with one of header (+ template), basic_user or query',
  allow: 'add at least one [[allow]] rule with a host',
  host: 'e.g. host = "api.example.com"',
  user: 'the remote user, e.g. user = "deploy"; there is no default',
  auth: 'auth = "key" or auth = "password"',
  host_key: 'the pinned fingerprint, as `ssh-keygen -lf <host key>.pub` prints it',
  commands: 'the allowed commands, e.g. commands = ["systemctl restart app-*"]',
};

const COMMON_KEYS = ['name', 'description', 'kind', 'approve', 'allow_addresses'] as const;

// The keys allowed in each table, for "unknown key" messages.
function allowedKeys(kind: 'http' | 'ssh' | null, path: readonly PropertyKey[]): readonly string[] {
  if (path.length === 0) return kind === 'ssh' ? SSH_KEYS : kind === 'http' ? HTTP_KEYS : COMMON_KEYS;
  if (path[0] === 'inject') return INJECT_KEYS;
  if (path[0] === 'allow') return ALLOW_RULE_KEYS;
  return [];
}

const BARE_KEY = /^[A-Za-z0-9_-]+$/;

export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const seg of path) {
    if (typeof seg === 'number') out += `[${seg}]`;
    else {
      const key = String(seg);
      out += `${out ? '.' : ''}${BARE_KEY.test(key) ? key : quote(key)}`;
    }
  }
  return out;
}

// A problem before its path is printed, so problems can be sorted.
interface Found {
  at: PropertyKey[];
  message: string;
}

function issueProblems(issue: z.core.$ZodIssue, kind: 'http' | 'ssh' | null): Found[] {
  if (issue.code === 'unrecognized_keys') {
    const allowed = allowedKeys(kind, issue.path);
    return issue.keys.map((key) => {
      const guess = closest(key, allowed);
      const hint = guess ? `did you mean ${guess}?` : allowed.length ? `allowed here: ${allowed.join(', ')}` : '';
      return { at: [...issue.path, key], message: `unknown key; remove it${hint ? ` (${hint})` : ''}` };
    });
  }
  let message = issue.message;
  const last = issue.path[issue.path.length - 1];
  const hint = typeof last === 'string' ? REQUIRED_HINTS[last] : undefined;
  if (message === 'is required' && hint) message = `is required: ${hint}`;
  return [{ at: [...issue.path], message }];
}

// Document order: keys in print order (unknown keys after known ones),
// list entries by index; the sort is stable, so one path keeps its order.
function sortedProblems(found: Found[], kind: 'http' | 'ssh' | null): Problem[] {
  const rank = (at: PropertyKey[], depth: number): number => {
    const seg = at[depth];
    if (typeof seg === 'number') return seg;
    const keys = allowedKeys(kind, at.slice(0, depth));
    const i = keys.indexOf(String(seg));
    return i === -1 ? keys.length : i;
  };
  const compare = (a: Found, b: Found): number => {
    for (let d = 0; d < Math.min(a.at.length, b.at.length); d += 1) {
      const diff = rank(a.at, d) - rank(b.at, d);
      if (diff !== 0) return diff;
    }
    return a.at.length - b.at.length;
  };
  return [...found].sort(compare).map((f) => ({ path: formatPath(f.at), message: f.message }));
}

function isTable(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Date) && !(v instanceof TomlFloat);
}

function own(obj: Record<string, unknown>, key: string): unknown {
  return Object.prototype.hasOwnProperty.call(obj, key) ? obj[key] : undefined;
}

// Checks that span fields, on the raw input, so that they run even when
// other fields have problems. Each only looks at values of the right type.
function httpCrossChecks(raw: Record<string, unknown>): Found[] {
  const problems: Found[] = [];
  const inject = own(raw, 'inject');
  if (isTable(inject)) {
    const forms = (['header', 'basic_user', 'query'] as const).filter((k) => own(inject, k) !== undefined);
    if (forms.length !== 1) {
      problems.push({
        at: ['inject'],
        message: `exactly one of header, basic_user, query must be set${forms.length > 1 ? ` (found ${forms.join(', ')})` : ' (found none)'}`,
      });
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
  problems.push(...headerProblems(raw));
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

type HttpParsed = z.output<typeof httpSchema>;
type SshParsed = z.output<typeof sshSchema>;

const DEFAULT_PORTS: Readonly<Record<HttpScheme, number>> = { http: 80, https: 443 };

function unique<T>(values: readonly T[]): T[] {
  return [...new Set(values)];
}

function buildInject(p: HttpParsed['inject']): HttpInject {
  if (p.header !== undefined) return { header: p.header, template: p.template as string };
  if (p.basic_user !== undefined) return { basic_user: p.basic_user };
  return { query: p.query as string };
}

function buildRule(p: HttpParsed['allow'][number], credentialApprove: Approve): HttpAllowRule {
  const schemes = unique(p.schemes);
  return {
    host: p.host,
    schemes,
    ports: unique(p.ports ?? schemes.map((s) => DEFAULT_PORTS[s])),
    methods: unique(p.methods),
    paths: unique(p.paths),
    approve: stricterApprove(credentialApprove, p.approve ?? credentialApprove),
  };
}

function buildHttp(p: HttpParsed): HttpCredentialDef {
  return {
    name: p.name,
    description: p.description,
    kind: 'http',
    approve: p.approve,
    redact_response: p.redact_response,
    pass_set_cookie: p.pass_set_cookie,
    ...(p.rate !== undefined ? { rate: p.rate } : {}),
    allow_addresses: unique(p.allow_addresses),
    ...(p.headers !== undefined && Object.keys(p.headers).length > 0
      ? { headers: Object.fromEntries(Object.entries(p.headers).map(([k, v]) => [k.toLowerCase(), v])) }
      : {}),
    inject: buildInject(p.inject),
    allow: p.allow.map((r) => buildRule(r, p.approve)),
  };
}

function buildSsh(p: SshParsed): SshCredentialDef {
  return {
    name: p.name,
    description: p.description,
    kind: 'ssh',
    host: p.host,
    port: p.port,
    user: p.user,
    auth: p.auth,
    host_key: p.host_key,
    commands: unique(p.commands),
    stdin: p.stdin,
    approve: p.approve,
    allow_addresses: unique(p.allow_addresses),
  };
}

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
    if (!r.success)
      return {
        ok: false,
        problems: sortedProblems(
          r.error.issues.flatMap((i) => issueProblems(i, 'ssh')),
          'ssh',
        ),
      };
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
