import * as fs from 'node:fs';
import { Problem, Refusal } from './errors';
import { loadNative, setNonDumpable } from './native';

// Process hardening (SPEC §3) for every postern process that handles a
// passphrase, a secret or an approval, plus the environment part of `doctor`.

// Variables that inject code or rewrite name resolution: their presence
// makes a hardened process refuse to run.
export const FORBIDDEN_ENV_REASONS: Readonly<Record<string, string>> = {
  NODE_OPTIONS: 'it can inject code into Node through --require, --import or --inspect',
  LD_PRELOAD: 'it loads a library into the process before postern runs',
  LD_AUDIT:
    'it loads auditing libraries into the process, which run before postern and see every call between libraries',
  LD_LIBRARY_PATH: 'it can substitute the shared libraries postern loads',
  HOSTALIASES: 'it rewrites host name resolution',
  OPENSSL_CONF:
    "it makes Node's OpenSSL read a configuration that can load providers and engines (code) into the process",
  OPENSSL_MODULES: "it tells Node's OpenSSL where to load provider modules (code) from",
  OPENSSL_ENGINES: "it tells Node's OpenSSL where to load engine modules (code) from",
};
export const FORBIDDEN_ENV: readonly string[] = Object.keys(FORBIDDEN_ENV_REASONS);

// Variables that would widen trust. Many machines set them (CI, corporate
// laptops), so they are tolerated but have no effect: the daemon connects to
// the address it checked and passes its own `ca` list and
// rejectUnauthorized: true on every TLS connection.
const PROXY = 'a proxy setting; postern connects only to the address it checked';
const CA = "extra trusted CAs; postern passes its own CA list (Node's bundled roots plus ca_file)";
export const NEUTRALISED_ENV_REASONS: Readonly<Record<string, string>> = {
  http_proxy: PROXY,
  HTTP_PROXY: PROXY,
  https_proxy: PROXY,
  HTTPS_PROXY: PROXY,
  all_proxy: PROXY,
  ALL_PROXY: PROXY,
  no_proxy: PROXY,
  NO_PROXY: PROXY,
  NODE_EXTRA_CA_CERTS: CA,
  SSL_CERT_FILE: CA,
  SSL_CERT_DIR: CA,
  NODE_TLS_REJECT_UNAUTHORIZED: 'it can disable certificate checks; postern always sets rejectUnauthorized: true',
};
export const NEUTRALISED_ENV: readonly string[] = Object.keys(NEUTRALISED_ENV_REASONS);

// A variable counts as set when it is *present*, even if empty. An empty
// value is harmless to today's consumers, but "present" is a rule a user can
// check with `env`, it does not depend on how each consumer (ld.so, node,
// libc) parses blank or whitespace values, and unsetting costs nothing.
function present(env: NodeJS.ProcessEnv, name: string): boolean {
  return Object.prototype.hasOwnProperty.call(env, name) && env[name] !== undefined;
}

export function forbiddenEnvironment(env: NodeJS.ProcessEnv = process.env): Problem[] {
  return FORBIDDEN_ENV.filter((name) => present(env, name)).map((name) => ({
    path: name,
    message: `is set (${FORBIDDEN_ENV_REASONS[name]}); unset it`,
  }));
}

export function neutralisedEnvironment(env: NodeJS.ProcessEnv = process.env): string[] {
  return NEUTRALISED_ENV.filter((name) => present(env, name));
}

// TracerPid from a /proc/<pid>/status text; null when the line is missing.
export function parseTracerPid(status: string): number | null {
  const m = /^TracerPid:\s*(\d+)\s*$/m.exec(status);
  return m ? Number(m[1]) : null;
}

// The pid of the process tracing `pid` (strace, gdb, ...), 0 when none.
export function tracerPid(pid: number | 'self' = 'self'): number {
  const file = `/proc/${pid}/status`;
  let traced: number | null = null;
  try {
    traced = parseTracerPid(fs.readFileSync(file, 'utf8'));
  } catch {
    // fall through: unreadable is treated like unparseable
  }
  if (traced === null) {
    throw new Refusal(
      'bad_environment',
      `cannot read TracerPid from ${file}; postern needs /proc mounted to check for debuggers`,
    );
  }
  return traced;
}

function processName(pid: number): string {
  try {
    return ` (${fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim()})`;
  } catch {
    return '';
  }
}

// A listener of its own on SIGUSR1 stops Node 20 from opening the inspector
// when the signal arrives (PLATFORM.md). harden() installs it first, and a
// process should call harden() before anything else, to keep the window short.
function ignoreInspectorSignal(): void {}

// Every postern command, hardened or not: `postern run` and `postern
// request` refuse no environment (they run the user's tools), but an
// inspector opened in them would let any local user run code as the
// process the daemon knows as the requester (the root of a run).
export function ignoreInspectorSignalEarly(): void {
  if (!process.listeners('SIGUSR1').includes(ignoreInspectorSignal)) process.on('SIGUSR1', ignoreInspectorSignal);
}

export function harden(role: string): void {
  ignoreInspectorSignalEarly();

  const forbidden = forbiddenEnvironment(process.env);
  if (forbidden.length > 0) {
    const names = forbidden.map((p) => p.path);
    const what = names.map((n) => `${n} is set (${FORBIDDEN_ENV_REASONS[n]})`).join(' and ');
    throw new Refusal(
      'bad_environment',
      `postern ${role} refuses to run: ${what}; unset ${names.length > 1 ? 'them' : 'it'} and start again`,
      { variables: names },
    );
  }

  // Non-dumpable before the tracer check, not after: once it is set, a
  // process of the same (unprivileged) uid can no longer attach, so the check
  // below cannot be raced; a tracer attached earlier stays visible to it.
  try {
    setNonDumpable();
  } catch (e) {
    if (e instanceof Refusal) throw e;
    const reason = e instanceof Error ? e.message : String(e);
    throw new Refusal(
      'bad_environment',
      `postern ${role} refuses to run: it cannot mark itself non-dumpable (${reason}); ` +
        'allow prctl(PR_SET_DUMPABLE) in the sandbox or seccomp profile and start again',
    );
  }

  const tracer = tracerPid('self');
  if (tracer !== 0) {
    throw new Refusal(
      'bad_environment',
      `postern ${role} refuses to run: it is being traced by process ${tracer}${processName(tracer)}, ` +
        'as TracerPid in /proc/self/status shows; start it again without a debugger or strace',
      { tracer_pid: tracer },
    );
  }
}

// ---- doctor -------------------------------------------------------------

export interface Finding {
  level: 'ok' | 'warn' | 'fail';
  what: string;
  fix?: string;
}

// Where the findings come from; the defaults read the live machine.
export interface EnvironmentSources {
  env: NodeJS.ProcessEnv;
  readFile: (file: string) => string | null; // null: absent or unreadable
  nodeVersion: string;
  loadAddon: () => unknown;
}

export const MIN_NODE: readonly [number, number] = [20, 18];

function readOrNull(file: string): string | null {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return null;
  }
}

// Soft limit of "Max core file size" from a /proc/<pid>/limits text.
export function parseCoreLimit(limits: string): string | null {
  const m = /^Max core file size\s+(\S+)/m.exec(limits);
  return m ? (m[1] ?? null) : null;
}

// Swap devices listed in a /proc/swaps text (first line is the header).
export function parseSwaps(swaps: string): string[] {
  return swaps
    .split('\n')
    .slice(1)
    .map((line) => line.trim().split(/\s+/)[0] ?? '')
    .filter((dev) => dev !== '');
}

export function nodeVersionOk(version: string, min: readonly [number, number] = MIN_NODE): boolean {
  const [major, minor] = version.replace(/^v/, '').split('.').map(Number);
  if (major === undefined || minor === undefined || Number.isNaN(major) || Number.isNaN(minor)) return false;
  return major > min[0] || (major === min[0] && minor >= min[1]);
}

function envFindings(env: NodeJS.ProcessEnv): Finding[] {
  const forbidden: Finding[] = forbiddenEnvironment(env).map((p) => ({
    level: 'fail',
    what: `${p.path} is set: ${FORBIDDEN_ENV_REASONS[p.path]}; postern's daemon and secret-handling commands refuse to run`,
    fix: `unset ${p.path}`,
  }));
  const neutralised: Finding[] = neutralisedEnvironment(env).map((name) => ({
    level: 'warn',
    what: `${name} is set: ignored by postern (${NEUTRALISED_ENV_REASONS[name]})`,
  }));
  return [
    ...(forbidden.length ? forbidden : [{ level: 'ok' as const, what: `none of ${FORBIDDEN_ENV.join(', ')} is set` }]),
    ...(neutralised.length
      ? neutralised
      : [{ level: 'ok' as const, what: 'no proxy or CA environment variables are set' }]),
  ];
}

function tracerFinding(status: string | null): Finding {
  const tracer = status === null ? null : parseTracerPid(status);
  if (tracer === null)
    return { level: 'warn', what: 'cannot read TracerPid from /proc/self/status', fix: 'mount /proc' };
  if (tracer !== 0) {
    return {
      level: 'fail',
      what: `this process is being traced by process ${tracer}`,
      fix: 'run postern without a debugger or strace',
    };
  }
  return { level: 'ok', what: 'no debugger or tracer is attached' };
}

function ptraceScopeFinding(scope: string | null): Finding {
  const nonDumpable = "postern's secret-handling processes still refuse attachment by being non-dumpable";
  const fix = 'set kernel.yama.ptrace_scope=1 (sysctl), or run the daemon as its own user (docs/operations.md)';
  if (scope === null) {
    return {
      level: 'warn',
      what: `Yama ptrace_scope is not available: your processes can debug each other; ${nonDumpable}`,
      fix,
    };
  }
  if (scope.trim() === '0') {
    return { level: 'warn', what: `ptrace_scope is 0: your processes can debug each other; ${nonDumpable}`, fix };
  }
  return { level: 'ok', what: `ptrace_scope is ${scope.trim()}` };
}

function coreFinding(limits: string | null): Finding {
  const soft = limits === null ? null : parseCoreLimit(limits);
  if (soft === null) return { level: 'warn', what: 'cannot read the core dump limit from /proc/self/limits' };
  if (soft !== '0') {
    return {
      level: 'warn',
      what: `core dumps are enabled (limit ${/^\d+$/.test(soft) ? `${soft} bytes` : soft}); postern's secret-handling processes are non-dumpable and write no core, but other programs' cores may hold what they saw`,
      fix: 'ulimit -c 0 (or LimitCORE=0 in a systemd unit)',
    };
  }
  return { level: 'ok', what: 'core dumps are disabled (ulimit -c 0)' };
}

function swapFinding(swaps: string | null): Finding {
  const devices = swaps === null ? [] : parseSwaps(swaps);
  if (devices.length > 0) {
    return {
      level: 'warn',
      what: `swap is active (${devices.join(', ')}): secrets in memory could be written to disk`,
      fix: 'use encrypted swap, or turn swap off (swapoff -a)',
    };
  }
  return { level: 'ok', what: 'no swap is active' };
}

function nodeFinding(version: string): Finding {
  if (!nodeVersionOk(version)) {
    return {
      level: 'fail',
      what: `Node.js ${version} is too old`,
      fix: `install Node.js ${MIN_NODE.join('.')} or newer`,
    };
  }
  return { level: 'ok', what: `Node.js ${version}` };
}

function addonFinding(load: () => unknown): Finding {
  try {
    load();
    return { level: 'ok', what: 'the native addon loads' };
  } catch (e) {
    return {
      level: 'fail',
      what: e instanceof Error ? e.message : String(e),
      fix: 'run `npm ci` or `node native/build.js` in the postern directory',
    };
  }
}

export function doctorEnvironmentFindings(overrides: Partial<EnvironmentSources> = {}): Finding[] {
  const sources: EnvironmentSources = {
    env: process.env,
    readFile: readOrNull,
    nodeVersion: process.version,
    loadAddon: loadNative,
    ...overrides,
  };
  const read = sources.readFile;
  return [
    ...envFindings(sources.env),
    tracerFinding(read('/proc/self/status')),
    ptraceScopeFinding(read('/proc/sys/kernel/yama/ptrace_scope')),
    coreFinding(read('/proc/self/limits')),
    swapFinding(read('/proc/swaps')),
    nodeFinding(sources.nodeVersion),
    addonFinding(sources.loadAddon),
  ];
}
