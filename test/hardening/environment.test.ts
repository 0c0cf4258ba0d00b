import t from 'tap';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import {
  doctorEnvironmentFindings,
  FORBIDDEN_ENV,
  FORBIDDEN_ENV_REASONS,
  forbiddenEnvironment,
  NEUTRALISED_ENV,
  NEUTRALISED_ENV_REASONS,
  neutralisedEnvironment,
  nodeVersionOk,
  parseCoreLimit,
  parseSwaps,
  parseTracerPid,
  tracerPid,
  type Finding,
} from '../../shared/hardening';
import { cleanEnv, cli } from '../helpers/postern';

t.test('the tables', async (t) => {
  t.same([...FORBIDDEN_ENV].sort(), [
    'HOSTALIASES',
    'LD_AUDIT',
    'LD_LIBRARY_PATH',
    'LD_PRELOAD',
    'NODE_OPTIONS',
    'OPENSSL_CONF',
    'OPENSSL_ENGINES',
    'OPENSSL_MODULES',
  ]);
  t.same([...NEUTRALISED_ENV].sort(), [
    'ALL_PROXY',
    'HTTPS_PROXY',
    'HTTP_PROXY',
    'NODE_EXTRA_CA_CERTS',
    'NODE_TLS_REJECT_UNAUTHORIZED',
    'NO_PROXY',
    'SSL_CERT_DIR',
    'SSL_CERT_FILE',
    'all_proxy',
    'http_proxy',
    'https_proxy',
    'no_proxy',
  ]);
  for (const name of FORBIDDEN_ENV) t.ok(FORBIDDEN_ENV_REASONS[name], `${name} has a reason`);
  for (const name of NEUTRALISED_ENV) t.ok(NEUTRALISED_ENV_REASONS[name], `${name} has a reason`);
});

t.test('forbiddenEnvironment: present counts, even empty; nothing else does', async (t) => {
  for (const name of FORBIDDEN_ENV) {
    for (const value of ['x', '']) {
      t.same(
        forbiddenEnvironment({ PATH: '/bin', [name]: value }),
        [{ path: name, message: `is set (${FORBIDDEN_ENV_REASONS[name]}); unset it` }],
        `${name}=${JSON.stringify(value)}`,
      );
    }
  }
  t.same(forbiddenEnvironment({ PATH: '/bin', node_options: 'x', LD_PRELOAD_X: 'y', NODE_EXTRA_CA_CERTS: '/x' }), []);
  t.same(forbiddenEnvironment({ NODE_OPTIONS: undefined }), [], 'an undefined value is not set');
  t.same(
    forbiddenEnvironment({ HOSTALIASES: 'a', NODE_OPTIONS: 'b' }).map((p) => p.path),
    ['NODE_OPTIONS', 'HOSTALIASES'],
  );
  t.same(forbiddenEnvironment(Object.create({ NODE_OPTIONS: 'inherited' }) as NodeJS.ProcessEnv), [], 'own keys only');
});

t.test('neutralisedEnvironment lists the trust-widening variables present', async (t) => {
  for (const name of NEUTRALISED_ENV) t.same(neutralisedEnvironment({ [name]: '' }), [name]);
  t.same(neutralisedEnvironment({ PATH: '/bin', NODE_OPTIONS: 'x' }), []);
});

t.test('tracerPid reads /proc/<pid>/status', async (t) => {
  t.equal(parseTracerPid('Name:\tx\nTracerPid:\t4321\nUid:\t0\n'), 4321);
  t.equal(parseTracerPid('Name:\tx\n'), null);
  t.equal(tracerPid(), 0, 'this test process is not traced');
  t.equal(tracerPid(process.pid), 0);

  // A shell started under strace prints its pid, then waits: its tracer is strace.
  const traced = spawn('strace', ['-o', '/dev/null', 'sh', '-c', 'echo $$; exec sleep 30 >/dev/null'], {
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  const [chunk] = (await once(traced.stdout!, 'data')) as [Buffer];
  const shellPid = Number(chunk.toString().trim());
  t.teardown(() => {
    process.kill(shellPid, 'SIGKILL');
    traced.kill('SIGKILL');
  });
  t.equal(tracerPid(shellPid), traced.pid, 'the strace process');

  const gone = spawnSync('true');
  t.throws(() => tracerPid(gone.pid), {
    name: 'Refusal',
    code: 'bad_environment',
    message: `/proc/${gone.pid}/status`,
  });
});

t.test('parsers of /proc texts', async (t) => {
  const limits = (core: string) =>
    'Limit                     Soft Limit           Hard Limit           Units     \n' +
    'Max stack size            8388608              unlimited            bytes     \n' +
    `Max core file size        ${core}                    unlimited            bytes     \n`;
  t.equal(parseCoreLimit(limits('0')), '0');
  t.equal(parseCoreLimit(limits('unlimited')), 'unlimited');
  t.equal(parseCoreLimit('garbage'), null);
  t.match(parseCoreLimit(fs.readFileSync('/proc/self/limits', 'utf8')), /^(\d+|unlimited)$/, 'parses the real file');

  const header = 'Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n';
  t.same(parseSwaps(header), []);
  t.same(
    parseSwaps(
      `${header}/swapfile                               file\t\t2097148\t\t0\t\t-2\n/dev/sdb2 partition 1 0 -3\n`,
    ),
    ['/swapfile', '/dev/sdb2'],
  );

  for (const [v, ok] of [
    ['v20.18.0', true],
    ['v20.20.2', true],
    ['v22.1.0', true],
    ['v20.17.9', false],
    ['v18.20.0', false],
    ['nonsense', false],
  ] as const) {
    t.equal(nodeVersionOk(v), ok, v);
  }
});

const level = (findings: Finding[], what: RegExp) => findings.find((f) => what.test(f.what))?.level;

t.test('doctor on this machine', async (t) => {
  const findings = doctorEnvironmentFindings();
  for (const f of findings) {
    t.ok(['ok', 'warn', 'fail'].includes(f.level), f.what);
    if (f.level !== 'ok') t.ok(f.fix || f.what.includes('ignored by postern'), `says what to do: ${f.what}`);
  }
  t.equal(level(findings, /^Node\.js /), 'ok');
  t.equal(level(findings, /native addon/), 'ok');
  t.equal(level(findings, /tracer is attached/), 'ok');
  // tap sets NODE_OPTIONS in this process; doctor must say so.
  t.equal(level(findings, /^NODE_OPTIONS is set/), 'fail');
  const core = parseCoreLimit(fs.readFileSync('/proc/self/limits', 'utf8'));
  t.equal(level(findings, /core dumps/), core === '0' ? 'ok' : 'warn');
  const swaps = parseSwaps(fs.readFileSync('/proc/swaps', 'utf8'));
  t.equal(level(findings, /swap/), swaps.length ? 'warn' : 'ok');
});

t.test('doctor in a child with core dumps enabled and a proxy variable set', async (t) => {
  // Compiled beside this file.
  const probe = path.resolve(__dirname, '..', 'helpers', 'hardening-probe.js');
  // env -u: tap's processinfo adds NODE_OPTIONS to every child's environment.
  const run = spawnSync(
    'sh',
    [
      '-c',
      'ulimit -c 1024 && exec env -u NODE_OPTIONS HTTPS_PROXY=http://127.0.0.1:9 "$@"',
      'sh',
      process.execPath,
      probe,
      'doctor',
    ],
    { encoding: 'utf8' },
  );
  t.equal(run.status, 0, run.stderr);
  const findings = JSON.parse(run.stdout) as Finding[];
  // sh counts ulimit -c in 512-byte blocks.
  t.match(
    findings.find((f) => /core dumps/.test(f.what)),
    { level: 'warn', what: /limit 524288 bytes.*non-dumpable/, fix: /ulimit -c 0/ },
  );
  t.match(
    findings.find((f) => /^HTTPS_PROXY/.test(f.what)),
    { level: 'warn', what: /ignored by postern/ },
  );
  t.match(
    findings.find((f) => /^none of NODE_OPTIONS/.test(f.what)),
    { level: 'ok' },
  );
});

t.test('doctor judges what it reads', async (t) => {
  const files: Record<string, string | null> = {
    '/proc/self/status': 'Name:\tnode\nTracerPid:\t77\n',
    '/proc/sys/kernel/yama/ptrace_scope': '0\n',
    '/proc/self/limits': 'Max core file size        unlimited            unlimited            bytes\n',
    '/proc/swaps': 'Filename\tType\tSize\tUsed\tPriority\n/swapfile file 1024 0 -2\n',
  };
  const findings = doctorEnvironmentFindings({
    env: { LD_PRELOAD: '/x.so', https_proxy: 'http://proxy:3128' },
    readFile: (f) => files[f] ?? null,
    nodeVersion: 'v20.17.0',
    loadAddon: () => {
      throw new Error('postern refuses to run without its native addon');
    },
  });
  t.match(findings, [
    { level: 'fail', what: /^LD_PRELOAD is set/, fix: 'unset LD_PRELOAD' },
    { level: 'warn', what: /^https_proxy is set: ignored by postern/ },
    { level: 'fail', what: /traced by process 77/, fix: /without a debugger/ },
    { level: 'warn', what: /ptrace_scope is 0/, fix: /kernel\.yama\.ptrace_scope=1/ },
    { level: 'warn', what: /core dumps are enabled \(limit unlimited\)/ },
    { level: 'warn', what: /swap is active \(\/swapfile\)/, fix: /encrypted swap/ },
    { level: 'fail', what: /Node\.js v20\.17\.0 is too old/, fix: /20\.18/ },
    { level: 'fail', what: /native addon/, fix: /node native\/build\.js/ },
  ]);
  t.equal(findings.length, 8);

  files['/proc/sys/kernel/yama/ptrace_scope'] = null;
  files['/proc/self/status'] = null;
  files['/proc/self/limits'] = 'Max core file size        0                    unlimited            bytes\n';
  files['/proc/swaps'] = null;
  const more = doctorEnvironmentFindings({
    env: {},
    readFile: (f) => files[f] ?? null,
    nodeVersion: 'v22.0.0',
    loadAddon: () => ({}),
  });
  t.match(more, [
    {
      level: 'ok',
      what: /^none of NODE_OPTIONS, LD_PRELOAD, LD_AUDIT, LD_LIBRARY_PATH, HOSTALIASES, OPENSSL_CONF, OPENSSL_MODULES, OPENSSL_ENGINES is set/,
    },
    { level: 'ok', what: /no proxy or CA/ },
    { level: 'warn', what: /cannot read TracerPid/ },
    { level: 'warn', what: /Yama ptrace_scope is not available/ },
    { level: 'ok', what: /core dumps are disabled/ },
    { level: 'ok', what: /no swap/ },
    { level: 'ok', what: 'Node.js v22.0.0' },
    { level: 'ok', what: /native addon loads/ },
  ]);
});

// Every command that hardens names itself once: "postern <command> refuses
// to run: ...", the whole stderr, exit 1, before it reads any config.
t.test('the refusal names the command once, for the daemon and every hardened command', async (t) => {
  const env = cleanEnv({ NODE_OPTIONS: '--no-warnings', POSTERN_HOME: '/nonexistent/postern-home' });
  const reason = `NODE_OPTIONS is set (${FORBIDDEN_ENV_REASONS['NODE_OPTIONS']}); unset it and start again`;
  const commands: [string, string[]][] = [
    ['daemon', ['daemon']],
    ['init', ['init']],
    ['unlock', ['unlock']],
    ['passwd', ['passwd']],
    ['config approve', ['config', 'approve']],
    ['cred', ['cred', 'add', '--file', '/nonexistent/def.toml']],
    ['cred', ['cred', 'update', 'x', '--file', '/nonexistent/def.toml']],
    ['cred', ['cred', 'rm', 'x']],
    ['approver', ['approver']],
    ['mcp', ['mcp']],
    ['audit show', ['audit', 'show']],
    ['audit rotate-key', ['audit', 'rotate-key']],
  ];
  for (const [role, args] of commands) {
    const r = cli({ env }, args);
    t.equal(r.code, 1, `${args.join(' ')}: exit 1`);
    t.equal(r.stderr, `postern ${role} refuses to run: ${reason}\n`, `${args.join(' ')}: the message`);
  }
});
