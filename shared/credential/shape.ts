// The zod schemas of a definition's shape (strict: unknown keys are
// problems), with the field checks of fields.ts wired to their paths and
// zod's own issues worded for the author.
import { z } from 'zod';
import { validateCommandRule } from '../command-rule';
import { parseHostPattern, parseSshHost } from '../host-pattern';
import { Check, ok, bad, quote } from './text';
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
  checkDefaultHeaderValue,
} from './fields';
import { checkEnvName, ENV_MAX } from './env-names';
import {
  checkAwsRegion,
  checkAwsService,
  checkClientId,
  checkScope,
  checkTokenUrl,
  checkGithubApi,
  checkRepositoryName,
  GITHUB_PERMISSION_LEVELS,
} from './computed-fields';

// Limits on list sizes: a definition is read by a person before approval,
// and policy matching walks these lists on every request.
export const LIMITS = { allow: 100, paths: 100, methods: 32, ports: 64, commands: 100, allow_addresses: 100 } as const;

// TOML floats are kept apart from integers (JSON cannot tell 443.0 from
// 443, TOML can), so "port = 22.0" is reported as a float, not accepted.
export class TomlFloat {
  constructor(readonly value: number) {}
}

export function describeValue(v: unknown): string {
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
export const errorMap: z.core.$ZodErrorMap = (iss) => {
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

// The computed forms (SPEC §13): the request signed, or a token obtained.
const awsSigV4Schema = z.strictObject({
  region: checked(checkAwsRegion),
  service: checked(checkAwsService),
});

const ID_MAX = Number.MAX_SAFE_INTEGER;

const githubAppSchema = z.strictObject({
  app_id: integerIn(1, ID_MAX),
  installation_id: integerIn(1, ID_MAX),
  api: checked(checkGithubApi).default('https://api.github.com'),
  repositories: z.array(checked(checkRepositoryName)).min(1).max(500).optional(),
  // Names are checked in httpCrossChecks (each problem at its own path).
  permissions: z.record(z.string(), z.enum(GITHUB_PERMISSION_LEVELS)).optional(),
});

const oauth2Schema = z.strictObject({
  token_url: checked(checkTokenUrl),
  client_id: checked(checkClientId),
  grant: z.enum(['client_credentials', 'refresh_token']),
  scopes: z.array(checked(checkScope)).min(1).max(100).optional(),
  client_auth: z.enum(['basic', 'post']).default('basic'),
});

const injectSchema = z.strictObject({
  header: checked(checkHeaderName).optional(),
  template: checked(checkTemplate).optional(),
  basic_user: checked(checkBasicUser).optional(),
  query: checked(checkQueryName).optional(),
  aws_sigv4: awsSigV4Schema.optional(),
  github_app: githubAppSchema.optional(),
  oauth2: oauth2Schema.optional(),
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

export const httpSchema = z.strictObject({
  ...commonShape,
  kind: z.literal('http'),
  redact_response: z.boolean().default(true),
  pass_set_cookie: z.boolean().default(false),
  rate: checked(checkRate).optional(),
  // Duplicates are checked in httpCrossChecks.
  env: z.array(checked(checkEnvName)).max(ENV_MAX).optional(),
  // Names are checked in httpCrossChecks (each problem at its own path).
  headers: z.record(z.string(), checked(checkDefaultHeaderValue)).optional(),
  inject: injectSchema,
  allow: z.array(ruleSchema).min(1).max(LIMITS.allow),
});

export const sshSchema = z.strictObject({
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
  // Checked against auth in sshCrossChecks.
  ssh_agent: z.boolean().default(false),
});

// Used when `kind` is missing or unknown: the fields both kinds share are
// still checked, so their problems are reported in the same round.
export const commonSchema = z.object(commonShape);
