// What a client under `postern run` sends through the proxy front door
// (SPEC §11, §6.2, §6.3), beyond the other suites here: very many
// header lines hiding a forbidden header; the inject header twice; a
// lower-case auth-scheme; a pipelined absolute-form request after the
// first; odd CONNECT authorities (percent-encoding); an HTTP/1.0 request in
// a tunnel; a placeholder used after lock and unlock while its run still
// runs. A real daemon, a real `postern run`, raw clients under it. The
// last two rows failed before: a refusal that told the client to remove a
// placeholder from the very header it belongs in, and one that told a
// program running under `postern run` to start under `postern run`.
import t from 'tap';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startStack } from '../helpers/stack';
import { startHttpUpstream, echo } from '../helpers/https-upstream';
import { cliBytes } from '../helpers/cli-bytes';
import { cli, eventually } from '../helpers/postern';
import { makeCanary, journalText } from '../helpers/canary';
import { exposures } from '../helpers/exposure';
import { parseRaw, sendRaw, connectHead } from '../helpers/proxy-raw-client';

const HOST = 'api.example.test';
const PLAIN = 'plain.example.test';

const ONE_CONNECTION_CLIENT = String.raw`
const fs = require('node:fs');
const net = require('node:net');
const proxy = new URL(process.env.HTTP_PROXY);
const auth = Buffer.from(decodeURIComponent(proxy.username) + ':' + decodeURIComponent(proxy.password)).toString('base64');
const text = fs.readFileSync(process.argv[2], 'utf8')
  .replace(/@@PH:([A-Z_]+)@@/g, (_m, v) => process.env[v])
  .replace(/@@AUTH@@/g, auth);
const c = net.connect(Number(proxy.port), proxy.hostname);
let got = Buffer.alloc(0);
const timer = setTimeout(() => c.destroy(), 15000);
c.on('connect', () => c.write(text));
c.on('data', (d) => (got = Buffer.concat([got, d])));
c.on('error', () => undefined);
c.on('close', () => { clearTimeout(timer); process.stdout.write(got.toString('base64') + '\n'); });
`;

t.test('requests a client sends through the proxy', async (t) => {
  const plain = await startHttpUpstream(echo);
  t.teardown(() => plain.close());
  const s = await startStack({ records: { [HOST]: { A: ['127.0.0.1'] }, [PLAIN]: { A: ['127.0.0.1'] } } });
  t.teardown(() => s.close());
  const secret = makeCanary('PROBEREQ');
  const P = s.up.port;
  const def = (name: string, host: string, port: number, scheme: string): string =>
    `name = "${name}"\nkind = "http"\nenv = ["${name.toUpperCase()}_TOKEN"]\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "${host}"\nschemes = ["${scheme}"]\nports = [${port}]\nmethods = ["GET", "POST"]\n`;
  s.addCredential('api', def('api', HOST, P, 'https'), secret);
  s.addCredential('plain', def('plain', PLAIN, plain.port, 'http'), secret);
  await s.approver();
  const received: Buffer[] = [];

  const one = async (head: string, body?: string) => {
    const run = await sendRaw(s.h, [
      {
        id: 1,
        connect: `${HOST}:${P}`,
        head,
        ...(body !== undefined ? { body: Buffer.from(body).toString('base64') } : {}),
      },
    ]);
    received.push(run.stdout, Buffer.from(run.stderr));
    const a = run.answers.get(1);
    const raw = Buffer.from(a?.raw ?? '', 'base64');
    received.push(raw);
    return { answer: a, raw, parsed: parseRaw(raw), run };
  };

  await t.test('2100 header lines then X-Forwarded-For: refused, never silently dropped (§6.2)', async (t) => {
    const before = s.up.requests.length;
    const filler = 'x:1\r\n'.repeat(2100);
    const r = await one(
      `GET /many HTTP/1.1\r\nHost: ${HOST}:${P}\r\nAuthorization: Bearer @@PH:API_TOKEN@@\r\n${filler}X-Forwarded-For: 10.0.0.1\r\n\r\n`,
    );
    t.equal(r.parsed.status, 400, `status: ${r.parsed.head} ${r.parsed.body.slice(0, 300)}`);
    t.equal(r.parsed.headers['x-postern-error'], 'bad_request');
    const sent = s.up.requests.slice(before);
    t.equal(
      sent.length,
      0,
      `nothing sent upstream (sent ${sent.length}, ${sent.map((q) => Object.keys(q.headers).length).join(',')} headers)`,
    );
  });

  await t.test('2100 header lines then Content-Length with a body: the body is not lost', async (t) => {
    const before = s.up.requests.length;
    const filler = 'y:1\r\n'.repeat(2100);
    const r = await one(
      `POST /many-body HTTP/1.1\r\nHost: ${HOST}:${P}\r\nAuthorization: Bearer @@PH:API_TOKEN@@\r\n${filler}Content-Length: 5\r\n\r\n`,
      'hello',
    );
    const sent = s.up.requests.slice(before);
    if (r.parsed.status === 200) {
      t.equal(sent.length, 1);
      t.equal(sent[0]?.body.toString(), 'hello', 'the upstream got the body the client sent');
    } else {
      t.equal(r.parsed.status, 400, r.parsed.head);
      t.equal(sent.length, 0);
    }
  });

  await t.test('the inject header twice with the placeholder: refused, nothing sent', async (t) => {
    const before = s.up.requests.length;
    const r = await one(
      `GET /twice HTTP/1.1\r\nHost: ${HOST}:${P}\r\nAuthorization: Bearer @@PH:API_TOKEN@@\r\nAuthorization: Bearer @@PH:API_TOKEN@@\r\n\r\n`,
    );
    t.equal(r.parsed.status, 400, `${r.parsed.head} ${r.parsed.body}`);
    t.equal(s.up.requests.length, before, 'not sent');
  });

  await t.test("a lower-case auth-scheme ('bearer', RFC 9110 §11.1: case-insensitive)", async (t) => {
    const before = s.up.requests.length;
    const r = await one(`GET /lower HTTP/1.1\r\nHost: ${HOST}:${P}\r\nAuthorization: bearer @@PH:API_TOKEN@@\r\n\r\n`);
    if (r.parsed.status === 200) {
      t.equal(s.up.requests.at(-1)?.headers['authorization'], `Bearer ${secret}`);
    } else {
      t.equal(s.up.requests.length, before, 'not sent');
      const msg = (JSON.parse(r.parsed.body) as { error: { message: string } }).error.message;
      t.notMatch(
        msg,
        /never into content: remove it/,
        `the message should tell the client the exact form its header needs, not to remove it: ${msg}`,
      );
    }
  });

  await t.test('a pipelined second absolute-form request is answered if it is sent', async (t) => {
    const req = (path: string, extra: string): string =>
      `GET http://${PLAIN}:${plain.port}${path} HTTP/1.1\r\nHost: ${PLAIN}:${plain.port}\r\n${extra}\r\n`;
    const bytes =
      req('/pipe-first', 'Proxy-Authorization: Basic @@AUTH@@\r\n') +
      req('/pipe-second', 'Authorization: Bearer @@PH:PLAIN_TOKEN@@\r\n');
    const file = join(s.h.dir, 'pipelined.txt');
    writeFileSync(file, bytes);
    const script = join(s.h.dir, 'one-connection-client.js');
    writeFileSync(script, ONE_CONNECTION_CLIENT);
    const run = await cliBytes(s.h.env, ['run', '--', process.execPath, script, file]);
    const raw = Buffer.from(run.stdout.toString().trim(), 'base64');
    received.push(raw, Buffer.from(run.stderr));
    const answers = raw.toString('latin1').match(/HTTP\/1\.1 \d{3} /g) ?? [];
    const second = plain.requests.filter((q) => q.url === '/pipe-second').length;
    t.ok(answers.length >= 1, 'the first is answered');
    t.ok(
      second === 0 || answers.length === 2,
      `the second was sent upstream ${second} time(s) but the client got ${answers.length} answer(s): ${raw.toString('latin1').slice(0, 600)}`,
    );
  });

  await t.test('odd CONNECT authorities', async (t) => {
    const rows: [string, number][] = [
      [`api%2Eexample.test:${P}`, 400], // percent-encoding is not a host name (docs/proxy.md §4)
      [`api.example.test%3A${P}:${P}`, 400],
      [`[::ffff:127.0.0.1]:${P}`, 403],
      [`[0:0:0:0:0:ffff:7f00:1]:${P}`, 403],
      [`api.example.test:${P}?x`, 400],
      [`*.example.test:${P}`, 400],
      [`xn--api-.example.test:${P}`, 400],
      [`:${P}`, 400],
      [`api.example.test:065535`, 400],
    ];
    for (const [authority, status] of rows) {
      const h = await connectHead(s.sock, authority);
      received.push(Buffer.from(h));
      t.equal(Number(h.split(' ')[1]), status, `${authority}: ${h.slice(0, 300)}`);
    }
  });

  await t.test('HTTP/1.0 inside a tunnel, no keep-alive: a whole answer, then the close', async (t) => {
    const r = await one(`GET /one-oh HTTP/1.0\r\nHost: ${HOST}:${P}\r\nAuthorization: Bearer @@PH:API_TOKEN@@\r\n\r\n`);
    t.equal(r.parsed.status, 200, r.parsed.head);
    t.match(r.parsed.head, /^HTTP\/1\.[01] /);
    t.notMatch(r.parsed.head, /transfer-encoding: chunked/i, 'no chunked framing to an HTTP/1.0 client');
    t.match(r.raw.toString('latin1'), /"url":"\/one-oh"/, 'the body arrived');
  });

  await t.test('after lock and unlock, a still-running run: a refusal that says what to do', async (t) => {
    const go = join(s.h.dir, 'go');
    const first = join(s.h.dir, 'first-done');
    const url = `https://${HOST}:${P}/after-lock`;
    const curl = `curl -sS --max-time 15 -D - -H "Authorization: Bearer $API_TOKEN" ${url}`;
    const running = cliBytes(s.h.env, [
      'run',
      '--',
      'sh',
      '-c',
      `${curl} > /dev/null; touch ${first}; for i in $(seq 300); do [ -e ${go} ] && break; sleep 0.05; done; ${curl}`,
    ]);
    t.ok(await eventually(() => existsSync(first), 15000), 'the first request done');
    t.equal(cli(s.h, ['lock']).code, 0);
    t.equal(cli(s.h, ['unlock', '--passphrase-file', s.h.passFile]).code, 0);
    await s.approver();
    writeFileSync(go, '');
    const r = await running;
    received.push(r.stdout, Buffer.from(r.stderr));
    const all = r.stdout.toString();
    const out = all.slice(all.lastIndexOf('HTTP/1.1 '));
    const status = Number(out.split(' ')[1]);
    t.equal(status, 400, out);
    const body = out.slice(out.indexOf('\r\n\r\n') + 4);
    const msg = (JSON.parse(body) as { error: { message: string } }).error.message;
    t.notMatch(
      msg,
      /start the program with `postern run`$/,
      `the program already runs under postern run; the message should say the run ended at lock and to restart it: ${msg}`,
    );
  });

  await s.d.stop();
  received.forEach((bytes, i) => t.same(exposures(bytes, secret), [], `no form of the secret (${i})`));
  t.same(exposures(s.d.logs(), secret), [], 'not in the log');
  t.same(exposures(await journalText(s.h), secret), [], 'not in the journal');
});
