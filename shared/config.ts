import { createHash, X509Certificate } from 'node:crypto';
import * as fs from 'node:fs';
import { isIPv4, isIPv6 } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { z } from 'zod';
import { canonicalJson, CanonicalValue } from './canonical-json';
import { formatProblems, Problem, Refusal } from './errors';
import { parseToml, TomlError, tomlSyntaxProblem } from './toml';
import { didYouMean } from './suggest';
import { checkDuration, checkSize, quoteValue } from './units';
import { caCertificates, pemBlocks } from './ca-list';

// The daemon's settings file (SPEC §3). One table, SETTINGS, lists every key
// with its default, its parser and the reason it exists; the zod schema, the
// defaults, the canonical form (whose hash the vault pins) and the text of
// executor.example.toml and of `postern init`'s config are all derived from it.

// ---------------------------------------------------------------- types

export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
export const LOG_FORMATS = ['auto', 'json', 'pretty'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

// Effective values: durations in ms, sizes in bytes, paths absolute
// (resolved against home), ca_file "" when unset.
export interface Config {
  daemon: {
    home: string;
    agent_socket: string;
    admin_socket: string;
    vault: string;
    audit_log: string;
    audit_segment_size: number;
    log_level: LogLevel;
    log_format: LogFormat;
    auto_lock: number;
    unlock_max: number;
    approval_timeout: number;
    max_pending: number;
    session_ttl: number;
    agent_uids: number[];
    agent_socket_mode: number;
    agent_socket_group: string;
    daemon_uid: number;
    agent_request_timeout: number;
  };
  http: {
    timeout: number;
    max_timeout: number;
    max_request_body: number;
    max_response_body: number;
    max_concurrent: number;
    dns_servers: string[];
    ca_file: string;
  };
  ssh: {
    timeout: number;
    max_output: number;
    connection_idle: number;
  };
  audit: {
    refusal_burst: number;
  };
  mcp: {
    max_result: number;
  };
}

export interface LoadedConfig {
  config: Config;
  configPath: string;
  home: string;
  paths: { agentSocket: string; adminSocket: string; vault: string; auditLog: string };
  canonical: string;
  hash: string;
  caFileContents: Buffer | null;
  exists: boolean;
}

type TableName = keyof Config;
export const TABLES: readonly TableName[] = ['daemon', 'http', 'ssh', 'audit', 'mcp'];
export type ConfigPath = { [T in TableName]: `${T}.${keyof Config[T] & string}` }[TableName];
type ValueAt<P extends ConfigPath> = P extends `${infer T extends TableName}.${infer K}`
  ? K extends keyof Config[T]
    ? Config[T][K]
    : never
  : never;

// How a path-valued setting is resolved once home is known.
type PathRole = 'home' | 'file' | 'optional-file';

interface Kind<T> {
  // Raw TOML value → checked value (paths still as written).
  schema: z.ZodType<T>;
  // The effective value as it appears in the canonical form.
  canonical(value: T): CanonicalValue;
  path?: PathRole;
  // How a person reads the value (config-changes.ts shows it so).
  unit?: 'duration' | 'size';
}

type TomlDefault = string | number | readonly never[];

export interface Setting<P extends ConfigPath = ConfigPath> {
  path: P;
  table: TableName;
  key: string;
  default: TomlDefault;
  kind: Kind<ValueAt<P>>;
  reason: string;
}

// ---------------------------------------------------------------- kinds

type Check<T> = { ok: true; value: T } | { ok: false; message: string };

function fromCheck<T>(check: (v: unknown) => Check<T>): z.ZodType<T> {
  return z.unknown().transform((v, ctx) => {
    const r = check(v);
    if (r.ok) return r.value;
    ctx.addIssue({ code: 'custom', message: r.message });
    return z.NEVER;
  });
}

const same = <T extends CanonicalValue>(v: T): CanonicalValue => v;

const duration: Kind<number> = { schema: fromCheck(checkDuration), canonical: same, unit: 'duration' };
const size: Kind<number> = { schema: fromCheck(checkSize), canonical: same, unit: 'size' };
// A journal segment holds at least one longest entry line (MAX_LINE_BYTES of
// shared/audit-format.ts): below that the writer would move to a new file,
// with its opening entries and a checkpoint, after nearly every entry.
export const MIN_AUDIT_SEGMENT_BYTES = 64 * 1024;
const segmentSize: Kind<number> = {
  schema: fromCheck((v) => {
    const r = checkSize(v);
    return r.ok && r.value < MIN_AUDIT_SEGMENT_BYTES
      ? { ok: false, message: `${quoteValue(v)}: must be at least 64KiB (one longest journal line); e.g. "64MiB"` }
      : r;
  }),
  canonical: same,
  unit: 'size',
};

// An MCP tool result is one line on stdio, and clients stop reading a line
// at 10 MiB (the official SDK does); a result also needs room for its
// envelope around the body.
const mcpResultSize: Kind<number> = {
  schema: fromCheck((v) => {
    const r = checkSize(v);
    if (!r.ok) return r;
    if (r.value > 8 * 1024 * 1024)
      return { ok: false, message: 'must be at most "8MiB": MCP clients read at most 10 MiB in one message' };
    if (r.value < 4096)
      return { ok: false, message: 'must be at least "4KiB", room for a result\'s summary and flags' };
    return r;
  }),
  canonical: same,
  unit: 'size',
};

function checkPathText(v: unknown, role: PathRole): Check<string> {
  if (typeof v !== 'string') return { ok: false, message: 'must be a path in quotes, e.g. "agent.sock"' };
  if (v === '') {
    if (role === 'optional-file') return { ok: true, value: v };
    if (role === 'home')
      return { ok: false, message: 'must not be empty; remove the line to use POSTERN_HOME or ~/.postern' };
    return { ok: false, message: 'must not be empty; write a file name (relative to home) or an absolute path' };
  }
  if (v.includes('\0')) return { ok: false, message: 'must not contain a NUL character' };
  if (v.startsWith('~') && v !== '~' && !v.startsWith('~/')) {
    return { ok: false, message: `${quoteValue(v)}: only "~" and "~/…" are expanded; write the full path instead` };
  }
  if (role === 'home' && !path.isAbsolute(v) && !v.startsWith('~')) {
    return { ok: false, message: `${quoteValue(v)}: must be an absolute path or start with "~/"` };
  }
  return { ok: true, value: v };
}

function pathKind(role: PathRole): Kind<string> {
  return { schema: fromCheck((v) => checkPathText(v, role)), canonical: same, path: role };
}

const logLevel: Kind<LogLevel> = {
  schema: z.enum(LOG_LEVELS, { error: `must be one of ${LOG_LEVELS.map((l) => `"${l}"`).join(', ')}` }),
  canonical: same,
};

const logFormat: Kind<LogFormat> = {
  schema: z.enum(LOG_FORMATS, { error: `must be one of ${LOG_FORMATS.map((f) => `"${f}"`).join(', ')}` }),
  canonical: same,
};

const MAX_UID = 4294967294; // (uid_t)-1 is "no uid" to the kernel

const uid = z
  .int({ error: 'must be a uid: a whole number such as 1001' })
  .min(0, { error: 'a uid cannot be negative' })
  .max(MAX_UID, { error: `a uid is at most ${MAX_UID}` });

// Sorted and deduplicated: the set is what matters, so [2, 1] and [1, 2]
// are the same config and hash the same.
const uidList: Kind<number[]> = {
  schema: z
    .array(uid, { error: 'must be a list of uids, e.g. [1001, 1002]' })
    .transform((uids) => [...new Set(uids)].sort((a, b) => a - b)),
  canonical: same,
};

const daemonUid: Kind<number> = {
  schema: z
    .int({ error: 'must be a uid (a whole number such as 999) or -1 for "the CLI\'s own uid"' })
    .min(-1, { error: 'must be a uid or -1' })
    .max(MAX_UID, { error: `a uid is at most ${MAX_UID}` }),
  canonical: same,
};

const concurrency: Kind<number> = {
  schema: z
    .int({ error: 'must be a whole number such as 64' })
    .min(1, { error: 'must be at least 1' })
    .max(100000, { error: 'must be at most 100000' }),
  canonical: same,
};

export function formatMode(mode: number): string {
  return `0${mode.toString(8).padStart(3, '0')}`;
}

// Sockets are reached by connect(), which needs write permission; read and
// execute bits add nothing, and "other" bits would open the agent socket to
// every user on the machine, which the threat model never allows.
function checkSocketMode(v: unknown): Check<number> {
  const hint = 'use "0600" (owner only) or "0660" (owner and agent_socket_group)';
  if (typeof v !== 'string') return { ok: false, message: `must be an octal mode in quotes; ${hint}` };
  if (!/^0[0-7]{3}$/.test(v))
    return { ok: false, message: `${quoteValue(v)} is not an octal mode of four digits; ${hint}` };
  const mode = parseInt(v, 8);
  if (mode & 0o007)
    return { ok: false, message: `${quoteValue(v)} would let every user on the machine use the socket; ${hint}` };
  if (mode & 0o111)
    return { ok: false, message: `${quoteValue(v)} has execute bits, which a socket must not have; ${hint}` };
  if ((mode & 0o600) !== 0o600)
    return { ok: false, message: `${quoteValue(v)} denies the daemon's own uid read and write; ${hint}` };
  return { ok: true, value: mode };
}

const socketMode: Kind<number> = { schema: fromCheck(checkSocketMode), canonical: (m: number) => formatMode(m) };

const group: Kind<string> = {
  schema: z
    .string({ error: 'must be a group name or numeric gid in quotes, or "" for none' })
    .regex(/^(|[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?|[0-9]{1,10})$/, {
      error: 'must be a group name (letters, digits, "_", ".", "-") or a numeric gid, or "" for none',
    }),
  canonical: same,
};

export interface DnsServer {
  address: string;
  port: number;
  family: 4 | 6;
}

// "ip", "ip:port", "ipv6", "[ipv6]" or "[ipv6]:port"; the port defaults to 53.
// Names are refused: finding the resolver must not itself need a resolver.
export function parseDnsServer(text: string): Check<DnsServer> {
  const hint = 'write an IP address with an optional port, e.g. "127.0.0.1:5353", "[::1]:53" or "1.1.1.1"';
  let host: string;
  let portText: string | undefined;
  let family: 4 | 6;
  const bracketed = /^\[([^\]]*)\](?::(.*))?$/.exec(text);
  if (bracketed) {
    host = bracketed[1] ?? '';
    portText = bracketed[2];
    family = 6;
  } else if (isIPv6(text)) {
    host = text;
    family = 6;
  } else {
    const colon = text.lastIndexOf(':');
    host = colon >= 0 ? text.slice(0, colon) : text;
    portText = colon >= 0 ? text.slice(colon + 1) : undefined;
    family = 4;
  }
  if (host.includes('%')) return { ok: false, message: `${quoteValue(text)}: IPv6 zone ids are not accepted; ${hint}` };
  if (family === 6 ? !isIPv6(host) : !isIPv4(host))
    return { ok: false, message: `${quoteValue(text)} is not an IP address; ${hint}` };
  let port = 53;
  if (portText !== undefined) {
    port = /^[0-9]{1,5}$/.test(portText) ? Number(portText) : 0;
    if (port < 1 || port > 65535)
      return { ok: false, message: `${quoteValue(text)}: the port must be a number from 1 to 65535; ${hint}` };
  }
  return { ok: true, value: { address: host.toLowerCase(), port, family } };
}

export function formatDnsServer(s: DnsServer): string {
  return s.family === 6 ? `[${s.address}]:${s.port}` : `${s.address}:${s.port}`;
}

// Normalised to "ip:port" / "[ipv6]:port", the form dns.Resolver#setServers takes.
const dnsServers: Kind<string[]> = {
  schema: z.array(
    fromCheck((v) => {
      if (typeof v !== 'string') return { ok: false, message: 'must be an address in quotes, e.g. "127.0.0.1:5353"' };
      const r = parseDnsServer(v);
      return r.ok ? { ok: true, value: formatDnsServer(r.value) } : r;
    }),
    { error: 'must be a list of addresses, e.g. ["127.0.0.1:5353"], or [] for the system resolver' },
  ),
  canonical: same,
};

// ---------------------------------------------------------------- the table

function setting<P extends ConfigPath>(
  settingPath: P,
  def: TomlDefault,
  kind: Kind<ValueAt<P>>,
  reason: string,
): Setting<P> {
  const [table, key] = settingPath.split('.') as [TableName, string];
  return { path: settingPath, table, key, default: def, kind, reason };
}

// In the order of SPEC §3. `home`'s default is documentation: when the key is
// absent, home comes from POSTERN_HOME, else ~/.postern.
export const SETTINGS = [
  setting(
    'daemon.home',
    '~/.postern',
    pathKind('home'),
    'where postern keeps its files; unset: POSTERN_HOME, else ~/.postern',
  ),
  setting(
    'daemon.agent_socket',
    'agent.sock',
    pathKind('file'),
    'agents connect here (HTTP over a Unix socket); relative to home, or absolute',
  ),
  setting(
    'daemon.admin_socket',
    'admin.sock',
    pathKind('file'),
    "the CLI and the approver connect here; only the daemon's own uid",
  ),
  setting(
    'daemon.vault',
    'vault',
    pathKind('file'),
    'the encrypted vault: credentials, policies, audit keys, approved config hash',
  ),
  setting('daemon.audit_log', 'audit.log', pathKind('file'), 'the append-only audit journal'),
  setting(
    'daemon.audit_segment_size',
    '64MiB',
    segmentSize,
    'the journal moves on to a new segment file (audit.log.1, .2, ...) past this size',
  ),
  setting(
    'daemon.log_level',
    'info',
    logLevel,
    'pino level (trace, debug, info, warn, error, fatal, silent); logs go to stderr',
  ),
  setting('daemon.log_format', 'auto', logFormat, '"json", "pretty", or "auto": pretty on a terminal, else JSON'),
  setting('daemon.auto_lock', '8h', duration, 'lock after this long without an agent request'),
  setting('daemon.unlock_max', '24h', duration, 'lock after this long unlocked, whatever the traffic'),
  setting('daemon.approval_timeout', '120s', duration, 'how long a request waits for a decision'),
  setting(
    'daemon.max_pending',
    32,
    concurrency,
    'requests waiting for approval, all processes together (at most 16 per process); beyond: 429 busy',
  ),
  setting('daemon.session_ttl', '8h', duration, 'longest life of an approved session'),
  setting('daemon.agent_uids', [], uidList, "uids allowed on the agent socket; empty: the daemon's own"),
  setting(
    'daemon.agent_socket_mode',
    '0600',
    socketMode,
    '"0660" with agent_socket_group when agents run as another user',
  ),
  setting(
    'daemon.agent_socket_group',
    '',
    group,
    'group (name or gid) given the agent socket; empty: leave it as created',
  ),
  setting('daemon.daemon_uid', -1, daemonUid, "the uid the CLI requires of admin.sock's peer; -1: its own"),
  setting(
    'daemon.agent_request_timeout',
    '10s',
    duration,
    'an agent must send a whole request (headers and body) within this; slower ones are refused',
  ),
  setting('http.timeout', '30s', duration, 'per request (approval wait excluded), unless timeout_ms is set'),
  setting('http.max_timeout', '10m', duration, 'the largest timeout_ms a request may set'),
  setting('http.max_request_body', '1MiB', size, 'larger request bodies are refused: 413 body_too_large'),
  setting('http.max_response_body', '8MiB', size, 'larger responses are truncated and flagged'),
  setting('http.max_concurrent', 64, concurrency, 'requests in flight beyond this: 429 busy'),
  setting('http.dns_servers', [], dnsServers, 'empty: system resolver; e.g. ["127.0.0.1:5353"]'),
  setting(
    'http.ca_file',
    '',
    pathKind('optional-file'),
    "extra PEM roots, added to Node's bundled roots; relative to home, or absolute",
  ),
  setting('ssh.timeout', '30s', duration, 'per command (approval wait excluded), unless timeout_ms is set'),
  setting('ssh.max_output', '8MiB', size, 'stdout+stderr together'),
  setting(
    'ssh.connection_idle',
    '10s',
    duration,
    'an SSH connection is kept this long after its last command, for reuse by the same credential',
  ),
  setting(
    'audit.refusal_burst',
    20,
    concurrency,
    'refusals journaled in full per second per process; beyond: summarised',
  ),
  setting(
    'mcp.max_result',
    '1MiB',
    mcpResultSize,
    'the largest tool result `postern mcp` returns; a larger body is cut and flagged truncated',
  ),
] as const;

// Compile-time proof that every key of Config has a row.
type Listed = (typeof SETTINGS)[number]['path'];
type AssertNever<T extends never> = T;
export type _EverySettingListed = AssertNever<Exclude<ConfigPath, Listed>>;

type AnySetting = Setting<ConfigPath> & { kind: Kind<unknown> };
const ROWS = SETTINGS as unknown as readonly AnySetting[];
const HOME_ROW = ROWS.find((r) => r.kind.path === 'home') as AnySetting;

// ---------------------------------------------------------------- schema

function rowSchema(row: AnySetting): z.ZodType<unknown> {
  // Home has no fixed default (it depends on the environment), so an absent
  // home stays absent and is resolved later.
  return row.kind.path === 'home' ? row.kind.schema.optional() : row.kind.schema.prefault(row.default);
}

function buildSchema(): z.ZodType<Record<string, Record<string, unknown>>> {
  const tables: Record<string, z.ZodType<Record<string, unknown>>> = {};
  for (const table of TABLES) {
    const shape: Record<string, z.ZodType<unknown>> = {};
    for (const row of ROWS) if (row.table === table) shape[row.key] = rowSchema(row);
    tables[table] = z.strictObject(shape).prefault({});
  }
  return z.strictObject(tables);
}

const CONFIG_SCHEMA = buildSchema();

// ---------------------------------------------------------------- problems

function isTable(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Date);
}

function formatIssuePath(p: readonly PropertyKey[]): string {
  return p.map((seg, i) => (typeof seg === 'number' ? `[${seg}]` : `${i === 0 ? '' : '.'}${String(seg)}`)).join('');
}

// Keys as written may be quoted TOML keys holding anything.
function keyText(k: string): string {
  return /^[A-Za-z0-9_-]+$/.test(k) ? k : quoteValue(k);
}

function unknownKeyProblems(parent: readonly PropertyKey[], keys: readonly string[], raw: unknown): Problem[] {
  if (parent.length === 0) {
    return keys.map((k) => {
      const value = isTable(raw) ? raw[k] : undefined;
      if (isTable(value)) {
        return {
          path: `[unknown table] ${keyText(k)}`,
          message: `postern has no [${keyText(k)}] table${didYouMean(k, TABLES)}; the tables are ${TABLES.map((n) => `[${n}]`).join(', ')}`,
        };
      }
      const homes = ROWS.filter((r) => r.key === k).map((r) => `[${r.table}]`);
      const where = homes.length
        ? `; it belongs under ${homes.join(' or ')}`
        : `; settings go under ${TABLES.map((n) => `[${n}]`).join(', ')}`;
      return { path: `[unknown key] ${keyText(k)}`, message: `not a top-level setting${where}` };
    });
  }
  const table = String(parent[0]);
  const known = ROWS.filter((r) => r.table === table).map((r) => r.key);
  return keys.map((k) => ({
    path: `[unknown key] ${table}.${keyText(k)}`,
    message: `[${table}] has no setting ${quoteValue(k)}${didYouMean(k, known)}; remove it or fix its spelling`,
  }));
}

function issueProblems(issue: z.core.$ZodIssue, raw: unknown): Problem[] {
  if (issue.code === 'unrecognized_keys') return unknownKeyProblems(issue.path, issue.keys, raw);
  if (issue.path.length === 1 && issue.code === 'invalid_type') {
    const table = String(issue.path[0]);
    return [
      { path: table, message: `must be a table: write [${table}] on a line of its own, with its settings below it` },
    ];
  }
  return [{ path: formatIssuePath(issue.path), message: issue.message }];
}

function badConfig(file: string, problems: readonly Problem[]): Refusal {
  const what = problems.length === 1 ? 'a problem in the config' : `${problems.length} problems in the config`;
  return new Refusal(
    'bad_config',
    `${file}: ${what}: ${formatProblems(problems)}. Fix the config (every setting is documented in executor.example.toml) and try again`,
    { problems: [...problems] },
  );
}

function fileRefusal(file: string, message: string): Refusal {
  return new Refusal('bad_config', `${file}: ${message}`, { problems: [{ path: '', message }] });
}

// ---------------------------------------------------------------- locations

export function expandTilde(p: string): string {
  if (p === '~') return os.homedir();
  if (p.startsWith('~/')) return path.join(os.homedir(), p.slice(2));
  return p;
}

function fromEnv(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v === '' ? undefined : v;
}

export function resolveLocations(opts: { configFlag?: string; env: NodeJS.ProcessEnv }): {
  configPath: string;
  homeFromEnvOrDefault: string;
  configExplicit: boolean;
} {
  const envHome = fromEnv(opts.env, 'POSTERN_HOME');
  const homeFromEnvOrDefault = path.resolve(
    envHome !== undefined ? expandTilde(envHome) : path.join(os.homedir(), '.postern'),
  );
  const explicit =
    opts.configFlag !== undefined && opts.configFlag !== '' ? opts.configFlag : fromEnv(opts.env, 'POSTERN_CONFIG');
  if (explicit !== undefined)
    return { configPath: path.resolve(expandTilde(explicit)), homeFromEnvOrDefault, configExplicit: true };
  return { configPath: path.join(homeFromEnvOrDefault, 'config.toml'), homeFromEnvOrDefault, configExplicit: false };
}

function samePlace(a: string, b: string): boolean {
  if (path.resolve(a) === path.resolve(b)) return true;
  try {
    return fs.realpathSync(a) === fs.realpathSync(b);
  } catch {
    return false;
  }
}

// ---------------------------------------------------------------- files

const MAX_CONFIG_BYTES = 1024 * 1024;
const MAX_CA_BYTES = 10 * 1024 * 1024;

function errnoCode(e: unknown): string {
  return (e as NodeJS.ErrnoException).code ?? String(e);
}

// Reads the config without following a symlink at the last component: the
// file decides what the daemon trusts, so it must be the file named, not
// whatever a link points at. Returns null when there is no file.
function readConfigFile(file: string): string | null {
  let st: fs.Stats;
  try {
    st = fs.lstatSync(file);
  } catch (e) {
    if (errnoCode(e) === 'ENOENT') return null;
    throw fileRefusal(
      file,
      `cannot read the config file (${errnoCode(e)}); check the path and its permissions, or pass --config FILE`,
    );
  }
  if (st.isSymbolicLink()) {
    throw fileRefusal(
      file,
      'the config file is a symbolic link, which postern refuses; replace the link with the file itself, or pass --config with the real path',
    );
  }
  if (!st.isFile())
    throw fileRefusal(file, 'the config file is not a regular file; point --config (or POSTERN_CONFIG) at a TOML file');
  let fd: number;
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
  } catch (e) {
    throw fileRefusal(file, `cannot open the config file (${errnoCode(e)}); check its permissions`);
  }
  try {
    const fst = fs.fstatSync(fd);
    if (!fst.isFile() || fst.ino !== st.ino || fst.dev !== st.dev) {
      throw fileRefusal(file, 'the config file changed while it was being read; try again');
    }
    if (fst.size > MAX_CONFIG_BYTES)
      throw fileRefusal(file, `the config file is larger than ${MAX_CONFIG_BYTES} bytes; it is not a postern config`);
    const bytes = fs.readFileSync(fd);
    try {
      return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    } catch {
      throw fileRefusal(file, 'the config file is not valid UTF-8; save it as UTF-8 text');
    }
  } finally {
    fs.closeSync(fd);
  }
}

function parseTomlText(file: string, text: string): Record<string, unknown> {
  try {
    return parseToml(text, { unsafeKeyBehaviour: 'throw' });
  } catch (e) {
    if (e instanceof TomlError) {
      const summary = tomlSyntaxProblem(e, text);
      const problem = {
        path: `[syntax] line ${e.line}, column ${e.column}`,
        message: `${summary}; fix the TOML syntax there`,
      };
      throw new Refusal(
        'bad_config',
        `${file}: not valid TOML: ${problem.path}: ${summary}. Fix the syntax there and try again`,
        {
          problems: [problem],
        },
      );
    }
    throw e;
  }
}

// The CA file is followed through symlinks (system bundles are often links)
// but must end at a regular file of PEM certificates that Node can parse.
function readCaFile(file: string): { ok: true; value: Buffer } | { ok: false; message: string } {
  let bytes: Buffer;
  try {
    const fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
    try {
      const st = fs.fstatSync(fd);
      if (!st.isFile())
        return { ok: false, message: `${file} is not a regular file; name a PEM file of CA certificates` };
      if (st.size > MAX_CA_BYTES)
        return {
          ok: false,
          message: `${file} is larger than ${MAX_CA_BYTES} bytes; name a PEM file of CA certificates`,
        };
      bytes = fs.readFileSync(fd);
    } finally {
      fs.closeSync(fd);
    }
  } catch (e) {
    return { ok: false, message: `cannot read ${file} (${errnoCode(e)}); fix the path, or set ca_file = "" for none` };
  }
  const blocks = pemBlocks(bytes);
  if (blocks.length === 0) {
    return {
      ok: false,
      message: `${file} holds no PEM certificate ("-----BEGIN CERTIFICATE-----"); name a PEM file of CA certificates`,
    };
  }
  for (const [i, block] of blocks.entries()) {
    try {
      new X509Certificate(block);
    } catch {
      return {
        ok: false,
        message: `${file}: certificate ${i + 1} of ${blocks.length} cannot be parsed; replace the file with valid PEM certificates`,
      };
    }
  }
  return { ok: true, value: bytes };
}

// ---------------------------------------------------------------- checks across keys

type Values = Map<ConfigPath, unknown>;

// Longest sun_path Linux accepts (108 bytes including the terminating NUL).
const MAX_SOCKET_PATH_BYTES = 107;

function socketLength(p: ConfigPath): { needs: ConfigPath[]; problems(v: Values): Problem[] } {
  return {
    needs: [p],
    problems: (v) => {
      const full = String(v.get(p));
      const n = Buffer.byteLength(full);
      return n > MAX_SOCKET_PATH_BYTES
        ? [
            {
              path: p,
              message: `${quoteValue(full)} is ${n} bytes; a Unix socket path may have at most ${MAX_SOCKET_PATH_BYTES}: choose a shorter home or an absolute socket path`,
            },
          ]
        : [];
    },
  };
}

const OWN_FILES: ConfigPath[] = [
  'daemon.home',
  'daemon.agent_socket',
  'daemon.admin_socket',
  'daemon.vault',
  'daemon.audit_log',
];

const CROSS_CHECKS: readonly { needs: ConfigPath[]; problems(v: Values): Problem[] }[] = [
  {
    needs: ['http.timeout', 'http.max_timeout'],
    problems: (v) =>
      Number(v.get('http.timeout')) > Number(v.get('http.max_timeout'))
        ? [{ path: 'http.timeout', message: 'is longer than http.max_timeout; raise max_timeout or lower timeout' }]
        : [],
  },
  socketLength('daemon.agent_socket'),
  socketLength('daemon.admin_socket'),
  {
    // Two roles sharing one path would overwrite each other.
    needs: OWN_FILES,
    problems: (v) => {
      const seen = new Map<string, ConfigPath>();
      const out: Problem[] = [];
      for (const p of OWN_FILES) {
        const full = String(v.get(p));
        const first = seen.get(full);
        if (first)
          out.push({
            path: p,
            message: `resolves to the same path as ${first} (${quoteValue(full)}); give each its own path`,
          });
        else seen.set(full, p);
      }
      return out;
    },
  },
];

// ---------------------------------------------------------------- loading

function rawValue(raw: Record<string, unknown>, row: AnySetting): unknown {
  const table = raw[row.table];
  return isTable(table) ? table[row.key] : undefined;
}

// Every row's value that is valid on its own, so the checks that depend on
// values can still run (and report) when other keys are wrong.
function validRowValues(raw: Record<string, unknown>): Values {
  const values: Values = new Map();
  for (const row of ROWS) {
    const r = rowSchema(row).safeParse(rawValue(raw, row));
    if (r.success && r.data !== undefined) values.set(row.path, r.data);
  }
  return values;
}

interface Locations {
  configPath: string;
  homeFromEnvOrDefault: string;
  configExplicit: boolean;
}

function evaluate(loc: Locations, raw: Record<string, unknown>, exists: boolean): LoadedConfig {
  const problems: Problem[] = [];
  const parsed = CONFIG_SCHEMA.safeParse(raw);
  let values: Values;
  if (parsed.success) {
    values = new Map();
    for (const row of ROWS) {
      const v = parsed.data[row.table]?.[row.key];
      if (v !== undefined) values.set(row.path, v);
    }
  } else {
    for (const issue of parsed.error.issues) problems.push(...issueProblems(issue, raw));
    values = validRowValues(raw);
  }

  // Home: the config's, else POSTERN_HOME, else ~/.postern. A config found
  // in one home that names another is ambiguous: which home was meant?
  const written = values.get('daemon.home');
  let home = loc.homeFromEnvOrDefault;
  if (typeof written === 'string') {
    home = path.resolve(expandTilde(written));
    if (!loc.configExplicit && !samePlace(home, loc.homeFromEnvOrDefault)) {
      problems.push({
        path: 'daemon.home',
        message:
          `names ${quoteValue(home)}, but this config was found in the home ${quoteValue(loc.homeFromEnvOrDefault)} ` +
          '(POSTERN_HOME, else ~/.postern); remove daemon.home from the config, or pass --config FILE to use it with the home it names',
      });
    }
  }
  // An invalid written home is already reported; relative paths cannot be
  // placed without it, so the checks that need them are skipped.
  const homeKnown = typeof written === 'string' || rawValue(raw, HOME_ROW) === undefined;
  if (homeKnown) values.set('daemon.home', home);
  for (const row of ROWS) {
    if (row.kind.path !== 'file' && row.kind.path !== 'optional-file') continue;
    const v = values.get(row.path);
    if (!homeKnown) values.delete(row.path);
    else if (typeof v === 'string' && v !== '') values.set(row.path, path.resolve(home, expandTilde(v)));
  }

  for (const check of CROSS_CHECKS) {
    if (check.needs.every((p) => values.has(p))) problems.push(...check.problems(values));
  }

  let caFileContents: Buffer | null = null;
  const caFile = values.get('http.ca_file');
  if (typeof caFile === 'string' && caFile !== '') {
    const r = readCaFile(caFile);
    if (r.ok) caFileContents = r.value;
    else problems.push({ path: 'http.ca_file', message: r.message });
  }

  if (problems.length > 0) throw badConfig(loc.configPath, problems);

  const tables: Record<string, Record<string, unknown>> = { daemon: {}, http: {}, ssh: {}, audit: {}, mcp: {} };
  for (const row of ROWS) (tables[row.table] as Record<string, unknown>)[row.key] = values.get(row.path);
  const config = tables as unknown as Config;
  const canonical = canonicalConfig(config, caFileContents);
  return {
    config,
    configPath: loc.configPath,
    home: config.daemon.home,
    paths: {
      agentSocket: config.daemon.agent_socket,
      adminSocket: config.daemon.admin_socket,
      vault: config.daemon.vault,
      auditLog: config.daemon.audit_log,
    },
    canonical,
    hash: configHash(canonical),
    caFileContents,
    exists,
  };
}

export function loadConfig(
  opts: { configFlag?: string; env?: NodeJS.ProcessEnv; allowMissing?: boolean } = {},
): LoadedConfig {
  const loc = resolveLocations({ configFlag: opts.configFlag, env: opts.env ?? process.env });
  const text = readConfigFile(loc.configPath);
  if (text === null) {
    if (!opts.allowMissing) {
      throw fileRefusal(
        loc.configPath,
        'no config file here; run `postern init` to create one, or pass --config FILE (or set POSTERN_CONFIG)',
      );
    }
    return evaluate(loc, {}, false);
  }
  return evaluate(loc, parseTomlText(loc.configPath, text), true);
}

// The effective config when no file sets anything, for a given home.
export function defaultConfig(home: string): Config {
  return evaluate(
    { configPath: '(defaults)', homeFromEnvOrDefault: path.resolve(home), configExplicit: false },
    {},
    false,
  ).config;
}

// ---------------------------------------------------------------- canonical form and hash

// Every key with its effective value, plus the CA file's hash, so that a
// changed CA bundle changes the config hash although the path did not change,
// and its certificates (only when there are some, so that records approved
// before they were listed still match a config without a CA file).
export function canonicalConfig(config: Config, caFileContents: Buffer | null): string {
  const out: Record<string, Record<string, CanonicalValue>> = { daemon: {}, http: {}, ssh: {}, audit: {}, mcp: {} };
  for (const row of ROWS) {
    (out[row.table] as Record<string, CanonicalValue>)[row.key] = row.kind.canonical(
      (config[row.table] as Record<string, unknown>)[row.key],
    );
  }
  (out.http as Record<string, CanonicalValue>).ca_file_sha256 = caFileContents
    ? createHash('sha256').update(caFileContents).digest('hex')
    : '';
  const certificates = caFileContents ? caCertificates(caFileContents) : [];
  if (certificates.length > 0)
    (out.http as Record<string, CanonicalValue>).ca_certificates = certificates.map((c) => ({ ...c }));
  return canonicalJson(out);
}

export function configHash(canonical: string): string {
  return `sha256:${createHash('sha256').update(canonical, 'utf8').digest('hex')}`;
}

// ---------------------------------------------------------------- differences

export interface ConfigChange {
  path: string;
  from: unknown;
  to: unknown;
}

function flatten(value: unknown, prefix: string, out: Map<string, unknown>): void {
  if (isTable(value)) {
    for (const k of Object.keys(value)) flatten(value[k], prefix === '' ? k : `${prefix}.${k}`, out);
  } else {
    out.set(prefix, value);
  }
}

function parseCanonical(text: string, which: string): Map<string, unknown> {
  const out = new Map<string, unknown>();
  if (text === '') return out;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new Refusal(
      'internal_error',
      `the ${which} config record is not valid JSON; review the config and run \`postern config approve\``,
    );
  }
  if (!isTable(value))
    throw new Refusal(
      'internal_error',
      `the ${which} config record is not an object; review the config and run \`postern config approve\``,
    );
  flatten(value, '', out);
  return out;
}

const ORDER = new Map<string, number>(
  ROWS.flatMap((r) =>
    r.path === 'http.ca_file' ? [r.path, 'http.ca_file_sha256', 'http.ca_certificates'] : [r.path],
  ).map((p, i) => [p, i]),
);

const PATH_KEYS = new Set<string>(ROWS.filter((r) => r.kind.path !== undefined).map((r) => r.path));

// Key by key, in the table's order; a key on one side only is reported with
// `undefined` on the other. "" (no approved record) reports every key.
export function diffCanonical(approved: string, current: string): ConfigChange[] {
  const a = parseCanonical(approved, 'approved');
  const b = parseCanonical(current, 'current');
  const keys = [...new Set([...a.keys(), ...b.keys()])].sort((x, y) => {
    const ox = ORDER.get(x) ?? Infinity;
    const oy = ORDER.get(y) ?? Infinity;
    return ox !== oy ? ox - oy : x < y ? -1 : x > y ? 1 : 0;
  });
  // A setting this version added, absent from a config approved before it
  // existed, is no change while it keeps its default: upgrading postern
  // does not lock anyone out (paths have no fixed default, and no new
  // setting is a path).
  const added =
    approved === '' ? new Map<string, unknown>() : parseCanonical(canonicalConfig(defaultConfig('/'), null), 'default');
  const changes: ConfigChange[] = [];
  for (const k of keys) {
    const from = a.get(k);
    const to = b.get(k);
    if (!a.has(k) && added.has(k) && !PATH_KEYS.has(k) && canonicalJson(added.get(k)) === canonicalJson(to)) continue;
    // The certificate list is read from the CA file: first listed for a file
    // whose contents are unchanged, it is the same approval.
    if (
      k === 'http.ca_certificates' &&
      !a.has(k) &&
      approved !== '' &&
      a.has('http.ca_file_sha256') &&
      a.get('http.ca_file_sha256') === b.get('http.ca_file_sha256')
    )
      continue;
    const fromText = a.has(k) ? canonicalJson(from) : undefined;
    const toText = b.has(k) ? canonicalJson(to) : undefined;
    if (fromText !== toText) changes.push({ path: k, from, to });
  }
  return changes;
}

// How a person reads a setting's value, if not as it is stored.
export function settingUnit(settingPath: string): 'duration' | 'size' | undefined {
  return ROWS.find((r) => r.path === settingPath)?.kind.unit;
}

// ---------------------------------------------------------------- config text

function tomlLiteral(v: TomlDefault): string {
  if (typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'number') return String(v);
  return '[]';
}

const HEADER = [
  '# postern daemon settings: no secrets and no credential policy',
  '# belong here; those live in the vault. The vault pins this file: after any',
  '# change, the daemon stays locked until `postern config approve`.',
  '#',
  '# Durations: a whole number and a unit: ms, s, m, h, d ("500ms", "30s", "8h"),',
  '#   more than zero and at most 24d (Node timers cannot wait longer).',
  '# Sizes: a whole number and a unit: B, KiB, MiB, GiB (powers of 1024) or',
  '#   KB, MB, GB (powers of 1000), more than zero and at most 1GiB.',
  '# Fractions ("1.5s"), signs, spaces and bare numbers are refused, as are',
  '# unknown keys and tables. Relative paths are relative to home; "~/" is',
  "# the user's home directory.",
  '#',
  '# Request headers (User-Agent, an API version) are not set here: they',
  '# belong to a credential, in the [headers] table of its definition.',
  '# postern sends User-Agent: postern/<version> when neither the agent nor',
  '# the credential sets one (docs/responses.md, "Headers postern adds").',
];

const HOME_NOTE = [
  '# home is commented out so that this file loads wherever it is placed: a',
  '# config found inside a home that names a different home is refused as',
  '# ambiguous. Set it only in a config passed with --config or POSTERN_CONFIG.',
];

const COMMENT_COLUMN = 32;

function renderConfigText(style: 'example' | 'initial'): string {
  const lines = [...HEADER];
  if (style === 'initial') {
    lines.push('#', '# Every setting is commented out and shows its default; uncomment a line to change it.');
  }
  for (const table of TABLES) {
    lines.push('', `[${table}]`);
    for (const row of ROWS) {
      if (row.table !== table) continue;
      const commented = style === 'initial' || row.kind.path === 'home';
      if (row.kind.path === 'home' && style === 'example') lines.push(...HOME_NOTE);
      const setting = `${commented ? '# ' : ''}${row.key} = ${tomlLiteral(row.default)}`;
      lines.push(`${setting.padEnd(COMMENT_COLUMN)} # ${row.reason}`);
    }
  }
  return `${lines.join('\n')}\n`;
}

// What executor.example.toml holds: every setting active except home.
export function exampleConfigText(): string {
  return renderConfigText('example');
}

// What `postern init` writes: every setting commented out, so the effective
// config is the defaults until the user changes a line.
export function initialConfigText(): string {
  return renderConfigText('initial');
}
