// The proxy front door's refusals (SPEC §11, §6.2, §6.3), through a real
// daemon and a real `postern run -- curl`: each refused request gets
// postern's status, `x-postern-error` and the §6.3 JSON body with the exact
// code; the upstream never sees it. A placeholder of another run, of a run
// that ended, in a body or in a header that is not its credential's inject
// slot is not honoured; §6.2's header rules apply to what the client sends.
// A CONNECT to a host no credential covers is tunnelled only to addresses
// §6.2 allows. Absolute-form http:// requests go through the same steps.
// The secret is in no byte curl received, nor the journal, nor the log.
import t, { type Test } from 'tap';
import net from 'node:net';
import { readFileSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { startStack, type Stack } from '../helpers/stack';
import { cliBytes } from '../helpers/cli-bytes';
import { cli, eventually } from '../helpers/postern';
import { makeCanary, journalText } from '../helpers/canary';
import { exposures } from '../helpers/exposure';
import { startHttpUpstream, echo } from '../helpers/https-upstream';

const credential = (name: string, host: string, port: number, scheme = 'https'): string =>
  `name = "${name}"\nkind = "http"\nenv = ["${name.toUpperCase()}_TOKEN"]\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n\n[[allow]]\nhost = "${host}"\nschemes = ["${scheme}"]\nports = [${port}]\n`;

interface Answer {
  status: number;
  headers: string;
  body: string;
  stdout: string;
  stderr: string;
}

// The last response head and body curl printed (-D - with the body after).
function lastAnswer(stdout: string, stderr: string): Answer {
  const at = stdout.lastIndexOf('HTTP/1.1 ');
  const rest = stdout.slice(at);
  const end = rest.indexOf('\r\n\r\n');
  return {
    status: Number(rest.split(' ')[1]),
    headers: rest.slice(0, end),
    body: rest.slice(end + 4),
    stdout,
    stderr,
  };
}

async function curlRun(s: Stack, script: string): Promise<Answer> {
  const r = await cliBytes(s.h.env, ['run', '--', 'sh', '-c', script]);
  return lastAnswer(r.stdout.toString(), r.stderr.toString());
}

const CURL = 'curl -sS --max-time 20 -D -';

function assertRefused(t: Test, a: Answer, status: number, code: string, what: string): void {
  t.equal(a.status, status, `${what}: status (${a.stdout} ${a.stderr})`);
  t.match(a.headers, new RegExp(`\\r\\nx-postern-error: ${code}\\r\\n`, 'i'), `${what}: x-postern-error`);
  t.match(a.headers, /\r\ncontent-type: application\/json/i, `${what}: content-type`);
  const body = JSON.parse(a.body) as { error: { code: string; message: string; audit_seq?: number } };
  t.equal(body.error.code, code, `${what}: the JSON code`);
  t.type(body.error.audit_seq, 'number', `${what}: journaled`);
}

t.test('refusals through the proxy', async (t) => {
  const plain = await startHttpUpstream(echo);
  t.teardown(() => plain.close());
  const s = await startStack({
    records: {
      'api.example.test': { A: ['127.0.0.1'] },
      'plain.example.test': { A: ['127.0.0.1'] },
      'other.example.test': { A: ['127.0.0.1'] },
    },
  });
  t.teardown(() => s.close());
  const secret = makeCanary('DOORSECRET');
  s.addCredential('api', credential('api', 'api.example.test', s.up.port), secret);
  s.addCredential('plain', credential('plain', 'plain.example.test', plain.port, 'http'), secret);
  await s.approver();
  const url = s.url('api.example.test', '/v1/x');
  const received: string[] = [];
  const run = async (script: string): Promise<Answer> => {
    const a = await curlRun(s, script);
    received.push(a.stdout, a.stderr);
    return a;
  };
  const seen = (): number => s.up.requests.length;

  await t.test('the placeholder in its slot is served', async (t) => {
    const a = await run(`${CURL} -H "Authorization: Bearer $API_TOKEN" ${url}`);
    t.equal(a.status, 200, a.stdout + a.stderr);
    t.equal(s.up.requests.at(-1)!.headers['authorization'], `Bearer ${secret}`);
  });

  await t.test('a request with no placeholder to a covered host reaches its allowed address', async (t) => {
    const a = await run(`${CURL} ${url}`);
    t.equal(a.status, 200, a.stdout + a.stderr);
    t.equal(s.up.requests.at(-1)!.headers['authorization'], undefined, 'sent as the client sent it');
  });

  const before = seen();
  const rows: { what: string; script: string; status: number; code: string }[] = [
    {
      what: 'a placeholder in the body',
      script: `${CURL} -H "Authorization: Bearer $API_TOKEN" --data "token=$API_TOKEN" ${url}`,
      status: 400,
      code: 'bad_request',
    },
    {
      what: 'a placeholder in a foreign header',
      script: `${CURL} -H "X-Token: $API_TOKEN" ${url}`,
      status: 400,
      code: 'bad_request',
    },
    {
      what: "another credential's placeholder: that credential's rules, which do not name this host",
      script: `${CURL} -H "Authorization: Bearer $PLAIN_TOKEN" ${url}`,
      status: 403,
      code: 'denied_policy',
    },
    {
      what: 'a forbidden header (x-forwarded-for)',
      script: `${CURL} -H "X-Forwarded-For: 10.0.0.1" ${url}`,
      status: 400,
      code: 'bad_request',
    },
    {
      what: 'a forbidden header (x-http-method-override)',
      script: `${CURL} -H "X-HTTP-Method-Override: DELETE" ${url}`,
      status: 400,
      code: 'bad_request',
    },
    {
      what: 'a host header naming another host than the CONNECT target',
      script: `${CURL} -H "Host: other.example.test" ${url}`,
      status: 400,
      code: 'bad_request',
    },
    {
      what: 'a placeholder sent over http:// to a credential that allows https only',
      script: `${CURL} -H "Authorization: Bearer $API_TOKEN" http://api.example.test:${s.up.port}/v1/x`,
      status: 403,
      code: 'denied_policy',
    },
  ];
  for (const row of rows) {
    await t.test(row.what, async (t) => assertRefused(t, await run(row.script), row.status, row.code, row.what));
  }
  t.equal(seen(), before, 'no refused request reached the upstream');

  await t.test('a placeholder of a run that ended', async (t) => {
    const file = join(s.h.dir, 'ended');
    await run(`echo "$API_TOKEN" > ${file}`);
    const old = readFileSync(file, 'utf8').trim();
    t.match(old, /^postern-api-[0-9a-f]{16}$/);
    assertRefused(t, await run(`${CURL} -H "Authorization: Bearer ${old}" ${url}`), 400, 'bad_request', 'ended run');
  });

  await t.test('a placeholder of another live run', async (t) => {
    const file = join(s.h.dir, 'live');
    const other = cliBytes(s.h.env, [
      'run',
      '--',
      'sh',
      '-c',
      `echo "$API_TOKEN" > ${file}.tmp; mv ${file}.tmp ${file}; sleep 6`,
    ]);
    await eventually(() => {
      try {
        return readFileSync(file, 'utf8').trim().length > 0;
      } catch {
        return false;
      }
    });
    const theirs = readFileSync(file, 'utf8').trim();
    const a = await run(`${CURL} -H "Authorization: Bearer ${theirs}" ${url}`);
    assertRefused(t, a, 400, 'bad_request', 'another run');
    t.match(JSON.parse(a.body).error.message, /it belongs to another run, or its run ended/);
    await other;
  });

  await t.test('absolute-form http:// through the same steps', async (t) => {
    const a = await run(
      `${CURL} -H "Authorization: Bearer $PLAIN_TOKEN" http://plain.example.test:${plain.port}/p?q=1`,
    );
    t.equal(a.status, 200, a.stdout + a.stderr);
    t.equal(plain.requests.at(-1)!.headers['authorization'], `Bearer ${secret}`);
    t.equal(plain.requests.at(-1)!.url, '/p?q=1');
    t.notOk('postern-run-client' in plain.requests.at(-1)!.headers, "postern run's header does not go upstream");
  });

  await t.test('a connection outlives its process: the next request is refused', async (t) => {
    // The process that connected sends one request, then execs; the new
    // program holds the connection but cannot speak for the old instance.
    // The request is one the pipeline refuses after the peer check (a
    // forbidden header), so no upstream is involved.
    const request = `GET http://plain.example.test:${plain.port}/again HTTP/1.1\\r\\nHost: plain.example.test:${plain.port}\\r\\nX-Forwarded-For: 10.0.0.1\\r\\n\\r\\n`;
    const script = [
      'import os, socket, sys',
      'def answer(s):',
      '    got = b""',
      '    while b"\\r\\n\\r\\n" not in got: got += s.recv(65536)',
      '    head, _, rest = got.partition(b"\\r\\n\\r\\n")',
      '    n = int([l.split(b":")[1] for l in head.split(b"\\r\\n") if l.lower().startswith(b"content-length")][0])',
      '    while len(rest) < n: rest += s.recv(65536)',
      '    sys.stdout.write(head.decode().split(" ")[1] + " " + rest.decode() + "\\n"); sys.stdout.flush()',
      'if len(sys.argv) == 2:',
      `    s = socket.socket(socket.AF_UNIX); s.connect(${JSON.stringify(s.sock)})`,
      `    s.sendall(b"${request}"); answer(s)`,
      '    os.set_inheritable(s.fileno(), True)',
      '    os.execv(sys.executable, [sys.executable, sys.argv[1], str(s.fileno()), "x"])',
      's = socket.socket(fileno=int(sys.argv[1]))',
      `s.sendall(b"${request}"); answer(s)`,
    ].join('\n');
    const file = join(s.h.dir, 'exec-peer.py');
    writeFileSync(file, script);
    const r = spawnSync('python3', [file, file], { encoding: 'utf8', timeout: 20_000 });
    const lines = r.stdout.trim().split('\n');
    t.equal(lines.length, 2, r.stdout + r.stderr);
    t.match(lines[0], /^400 /, 'the first request, from the process that connected, is judged');
    t.equal(JSON.parse(lines[0]!.slice(4)).error.code, 'bad_request');
    t.match(lines[1], /^403 /, 'the second, after exec, is refused');
    t.equal(JSON.parse(lines[1]!.slice(4)).error.code, 'unidentified_peer');
  });

  await t.test('a CONNECT to a host no credential covers, tunnelled: the address checks refuse loopback', async (t) => {
    const a = await run(`${CURL} https://other.example.test:${s.up.port}/`);
    t.equal(a.status, 403, a.stdout + a.stderr);
    t.match(a.headers, /\r\nx-postern-error: denied_address\r\n/i);
    const raw = await connectStraight(s.sock, `other.example.test:${s.up.port}`);
    t.equal(rawAnswer(raw).status, 403);
    t.equal(rawAnswer(raw).json.error.code, 'denied_address');
  });

  await t.test('a malformed CONNECT target', async (t) => {
    for (const target of [
      'nohost',
      'api.example.test:0',
      'api.example.test:70000',
      'a@b:443',
      'api.example.test',
      '[zz]:443',
    ]) {
      const raw = rawAnswer(await connectStraight(s.sock, target));
      t.equal(raw.status, 400, target);
      t.equal(raw.json.error.code, 'bad_request', target);
      t.match(raw.headers, /\r\nx-postern-error: bad_request\r\n/i, target);
    }
  });

  await t.test('a wrong proxy token', async (t) => {
    const wrong = `https_proxy=$(echo "$https_proxy" | sed 's#//[^@]*@#//wrong:wrong@#')`;
    const a = await run(`${wrong} ${CURL} ${url}`);
    t.equal(a.status, 407, a.stdout + a.stderr);
    const r = await run(`${CURL} ${url}`);
    t.equal(r.status, 200, 'the right token is served');
  });

  await s.d.stop();
  for (const bytes of received) t.same(exposures(bytes, secret), [], 'the secret is in no byte curl received');
  t.same(exposures(s.d.logs(), secret), [], "the secret is not in the daemon's log");
  const journal = await journalText(s.h);
  t.same(exposures(journal, secret), [], 'the secret is not in the journal');
  t.match(journal, /"kind":"agent_refused"[^\n]*"endpoint":"CONNECT /, 'CONNECT refusals are journaled');
});

t.test('proxy.other_hosts = "refuse"', async (t) => {
  const s = await startStack({ config: '[proxy]\nother_hosts = "refuse"' });
  t.teardown(() => s.close());
  const a = await curlRun(s, `${CURL} https://elsewhere.example.test:443/`);
  t.equal(a.status, 403, a.stdout + a.stderr);
  t.match(a.headers, /\r\nx-postern-error: denied_policy\r\n/i);
  const raw = rawAnswer(await connectStraight(s.sock, 'elsewhere.example.test:443'));
  t.equal(raw.json.error.code, 'denied_policy');
  t.match(raw.json.error.message, /other_hosts is "refuse"/);

  // Locked: the lock's refusal is the answer to the CONNECT.
  t.equal(cli(s.h, ['lock']).code, 0);
  const locked = rawAnswer(await connectStraight(s.sock, 'api.example.test:443'));
  t.equal(locked.status, 423);
  t.equal(locked.json.error.code, 'vault_locked');
  t.match(locked.headers, /\r\nx-postern-error: vault_locked\r\n/i);
});

function connectStraight(socket: string, authority: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const c = net.connect(socket);
    let got = '';
    c.on('connect', () => c.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`));
    c.on('data', (d: Buffer) => (got += d.toString()));
    c.on('error', reject);
    c.on('close', () => resolve(got));
  });
}

function rawAnswer(raw: string): {
  status: number;
  headers: string;
  json: { error: { code: string; message: string } };
} {
  const end = raw.indexOf('\r\n\r\n');
  return { status: Number(raw.split(' ')[1]), headers: raw.slice(0, end + 2), json: JSON.parse(raw.slice(end + 4)) };
}
