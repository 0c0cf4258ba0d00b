// The header rows and the path rows of the hostile request tables, through
// the proxy front door (SPEC §11, §6.2, §4 `paths`): a real daemon, a real
// `postern run`, and a client under it that speaks raw HTTP/1.1 through
// HTTPS_PROXY: a CONNECT with the run's proxy token, TLS trusting only the
// bundle in SSL_CERT_FILE, then each row's request written byte for byte,
// with the credential's placeholder in its inject slot. Each row asserts the
// exact status, `x-postern-error`, the JSON body's code and a new journal
// entry; a refused row never reached the upstream; a row that succeeds on
// POST /v1/http succeeds here, with what the upstream received. What SPEC
// §11 changes for a proxied request is asserted as it says: hop-by-hop
// headers and accept-encoding are removed, not refused. The secret is in no
// byte the client received, nor the journal, nor the daemon's log.
import t, { type Test } from 'tap';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startStack } from '../helpers/stack';
import { cliBytes } from '../helpers/cli-bytes';
import { makeCanary, journalText, journalBytes } from '../helpers/canary';
import { exposures } from '../helpers/exposure';
import type { Row } from '../helpers/request-rows';
import { hostilePathRows, hostileRequestRows, hostileUrlRows } from '../helpers/hostile-rows';

const HOST = 'api.example.test';

// The client run under `postern run`: reads the requests from the file named
// by its argument, sends each on its own CONNECT tunnel, and prints one JSON
// line per request with the raw response bytes (or none, when the
// connection closed without one). `@@PH:VAR@@` in a request stands for the
// placeholder in $VAR, `@@B64:USER:VAR@@` for base64("USER:" + $VAR).
const CLIENT = String.raw`
const fs = require('node:fs');
const net = require('node:net');
const tls = require('node:tls');
const proxy = new URL(process.env.HTTPS_PROXY);
const auth = Buffer.from(decodeURIComponent(proxy.username) + ':' + decodeURIComponent(proxy.password)).toString('base64');
const ca = fs.readFileSync(process.env.SSL_CERT_FILE);
const fill = (text) =>
  text
    .replace(/@@PH:([A-Z_]+)@@/g, (_m, v) => process.env[v])
    .replace(/@@B64:([a-z]+):([A-Z_]+)@@/g, (_m, u, v) => Buffer.from(u + ':' + process.env[v]).toString('base64'));

// A response is complete at its content-length, at the last chunk, or at close.
function complete(buf) {
  const end = buf.indexOf('\r\n\r\n');
  if (end === -1) return false;
  const head = buf.subarray(0, end).toString('latin1');
  const body = buf.subarray(end + 4);
  const cl = /\r\ncontent-length: *(\d+)/i.exec(head);
  if (cl) return body.length >= Number(cl[1]);
  if (/\r\ntransfer-encoding: *chunked/i.test(head)) return body.includes('\r\n0\r\n\r\n') || body.subarray(0, 5).toString() === '0\r\n\r\n';
  return false;
}

function send(r) {
  return new Promise((resolve) => {
    const c = net.connect(Number(proxy.port), proxy.hostname);
    let got = Buffer.alloc(0);
    let done = false;
    const finish = (what) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      c.destroy();
      resolve({ id: r.id, ...what });
    };
    const timer = setTimeout(() => finish({ error: 'timeout', raw: got.toString('base64') }), 15000);
    c.on('error', (e) => finish({ error: String(e) }));
    c.once('connect', () => c.write('CONNECT ' + r.connect + ' HTTP/1.1\r\nHost: ' + r.connect + '\r\nProxy-Authorization: Basic ' + auth + '\r\n\r\n'));
    let head = Buffer.alloc(0);
    const onHead = (d) => {
      head = Buffer.concat([head, d]);
      if (head.indexOf('\r\n\r\n') === -1) return;
      c.off('data', onHead);
      if (!/^HTTP\/1\.1 200 /.test(head.toString('latin1'))) return finish({ error: 'CONNECT refused: ' + head.toString('latin1') });
      const s = tls.connect({ socket: c, servername: r.connect.split(':')[0], ca, ALPNProtocols: ['http/1.1'] });
      s.on('error', (e) => finish({ error: String(e), raw: got.toString('base64') }));
      s.on('secureConnect', () => {
        s.write(Buffer.from(fill(r.head), 'utf8'));
        if (r.body) s.write(Buffer.from(r.body, 'base64'));
      });
      s.on('data', (d) => {
        got = Buffer.concat([got, d]);
        if (complete(got)) finish({ raw: got.toString('base64') });
      });
      s.on('close', () => finish({ raw: got.toString('base64'), closed: true }));
    };
    c.on('data', onHead);
  });
}

(async () => {
  for (const r of JSON.parse(fs.readFileSync(process.argv[2], 'utf8'))) process.stdout.write(JSON.stringify(await send(r)) + '\n');
})();
`;

interface Wire {
  id: number;
  connect: string;
  head: string;
  body?: string;
}

interface Answer {
  id: number;
  raw?: string;
  closed?: boolean;
  error?: string;
}

// Where each credential of the rows takes its placeholder.
const SLOTS: Record<string, { header?: string; query?: string }> = {
  api: { header: 'X-Api-Key: Key @@PH:API_TOKEN@@' },
  basic: { header: 'Authorization: Basic @@B64:bob:BASIC_TOKEN@@' },
  q: { query: 'api_key=@@PH:Q_TOKEN@@' },
  pub: { header: 'Authorization: Bearer @@PH:PUB_TOKEN@@' },
};

// A row's JSON request as the HTTP/1.1 request a client would send inside
// the CONNECT tunnel: the Host of the target, the placeholder in the
// credential's slot, a row marker the upstream records, then the row's
// headers as written.
function wire(id: number, row: Row, P: number): Wire {
  const req = row.req as { credential: string; method: string; url: string; headers?: Record<string, string> };
  const origin = `https://${HOST}:${P}`;
  if (!req.url.startsWith(`${origin}/`)) throw new Error(`${row.what}: not a request to ${origin}`);
  const slot = SLOTS[req.credential];
  if (!slot) throw new Error(`${row.what}: no slot for credential ${req.credential}`);
  let target = req.url.slice(origin.length);
  if (slot.query) target += (target.includes('?') ? '&' : '?') + slot.query;
  const lines = [`${req.method} ${target} HTTP/1.1`, `Host: ${HOST}:${P}`];
  if (slot.header) lines.push(slot.header);
  lines.push(`x-row: ${id}`);
  for (const [name, value] of Object.entries(req.headers ?? {})) lines.push(`${name}: ${value}`);
  return { id, connect: `${HOST}:${P}`, head: lines.join('\r\n') + '\r\n\r\n' };
}

interface Parsed {
  status: number;
  head: string;
  headers: Record<string, string>;
  body: string;
}

function parse(raw: Buffer): Parsed {
  const end = raw.indexOf('\r\n\r\n');
  const head = raw.subarray(0, end).toString('latin1');
  const headers: Record<string, string> = {};
  for (const line of head.split('\r\n').slice(1)) {
    const i = line.indexOf(':');
    headers[line.slice(0, i).toLowerCase()] = line.slice(i + 1).trim();
  }
  let body = raw.subarray(end + 4);
  if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
    const parts: Buffer[] = [];
    let at = 0;
    for (;;) {
      const eol = body.indexOf('\r\n', at);
      const n = parseInt(body.subarray(at, eol).toString(), 16);
      if (!(n > 0)) break;
      parts.push(body.subarray(eol + 2, eol + 2 + n));
      at = eol + 2 + n + 2;
    }
    body = Buffer.concat(parts);
  }
  return { status: Number(head.split(' ')[1]), head, headers, body: body.toString('utf8') };
}

// What a row expects through the proxy, where SPEC §11 says otherwise than
// POST /v1/http does, or where the row's bytes on the wire are another
// request than its JSON fields.
type Expect = { removed: string } | { status: number; code: string; message: RegExp } | null;

// Removed, not refused (SPEC §11).
const HOP_BY_HOP = ['connection', 'keep-alive', 'te', 'trailer', 'upgrade', 'accept-encoding'];

// `host` must name the CONNECT target, and the client's request always has
// its Host line: a second one is refused as given twice. A CR LF in a value
// and a "host:" name both write a second Host line on the wire.
const SECOND_HOST = { status: 400, code: 'bad_request', message: /header "host" is given twice/ };
const WRITTEN_AS_HOST = [
  'forbidden header host',
  'forbidden header Host',
  'CR LF in a header value',
  'a colon in a header name',
];

// A request the HTTP parser rejects inside the tunnel (a header line that
// is not "name: value", a bare CR or LF, NUL, a space in a name or the
// request target, non-ASCII in the target) never becomes fields to name:
// it is refused as not valid HTTP/1.1 (journaled as agent_refused, as the
// agent socket answers malformed HTTP), and the upstream is not reached.
const UNPARSED = { status: 400, code: 'bad_request', message: /not valid HTTP\/1\.1/ };
const PARSER_REJECTS = [
  'CR LF in a header name',
  'LF in a header name',
  'NUL in a header name',
  'a bare LF in a header value',
  'a bare CR in a header value',
  'NUL in a header value',
  'a space in a header name',
  'a space in the path',
  'non-ASCII in the path',
];

function throughProxy(row: Row): Expect {
  const m = /^forbidden header (.+)$/.exec(row.what);
  const name = m ? (m[1] as string).toLowerCase() : null;
  if (name && (HOP_BY_HOP.includes(name) || name.startsWith('proxy-'))) return { removed: name };
  if (WRITTEN_AS_HOST.includes(row.what)) return SECOND_HOST;
  if (PARSER_REJECTS.includes(row.what)) return UNPARSED;
  return null;
}

// The rows taken: the header rows of the request table (the rows before its
// bodies), the path rows of the URL table (requests to the API origin with a
// path other than /v1/x), and every row of the path table; less those that
// cannot apply to a proxied request, or that show a difference below. The
// body and field rows are about the JSON request (a proxied body is bytes,
// with no body_base64 or fields), and the host, port and scheme rows about
// what a CONNECT names.
function selectRows(t: Test, P: number, secret: string): Row[] {
  const requests = hostileRequestRows(P, secret);
  const bodies = requests.findIndex((r) => r.what === 'body and body_base64 both');
  t.ok(bodies > 50, 'the header rows end where the body rows begin');
  const origin = `https://${HOST}:${P}`;
  const paths = hostileUrlRows(P).filter((r) => {
    const req = r.req as { url?: unknown };
    return typeof req.url === 'string' && req.url.startsWith(`${origin}/`) && req.url !== `${origin}/v1/x`;
  });
  const all = [...requests.slice(0, bodies), ...paths, ...hostilePathRows(P, secret)];
  const names = new Set(all.map((r) => r.what));
  for (const what of Object.keys(LEFT_OUT)) t.ok(names.has(what), `the row left out exists: ${what}`);
  for (const what of [...WRITTEN_AS_HOST, ...PARSER_REJECTS]) t.ok(names.has(what), `the row exists: ${what}`);
  return all.filter((r) => !(r.what in LEFT_OUT));
}

// The front door reads the body by content-length (and removes it): a value
// that disagrees with the bytes sent is another message on the wire, and
// the front door rightly waits for the body it announces.
const FRAMING = 'frames the message on the client connection';
// A JSON type, which a header line has none of.
const JSON_SHAPE = 'a JSON shape: a header line is always text';
const LEFT_OUT: Record<string, string> = {
  'forbidden header content-length': FRAMING,
  'forbidden header Content-Length': FRAMING,
  'a non-string header value': JSON_SHAPE,
  'headers as an array': JSON_SHAPE,
};

t.test('the hostile header and path rows through the proxy front door', async (t) => {
  const s = await startStack();
  t.teardown(() => s.close());
  const P = s.up.port;
  const secret = makeCanary('ROWSECRET');
  const allow = (paths: string, methods = '"GET", "POST"'): string =>
    `[[allow]]\nhost = "${HOST}"\nports = [${P}]\nmethods = [${methods}]\npaths = [${paths}]\n`;
  const cred = (name: string, inject: string, rules: string): string =>
    `name = "${name}"\nkind = "http"\nenv = ["${name.toUpperCase()}_TOKEN"]\nallow_addresses = ["127.0.0.1/32"]\n[inject]\n${inject}\n${rules}`;
  s.addCredential('api', cred('api', 'header = "X-Api-Key"\ntemplate = "Key {secret}"', allow('"/v1/*"')), secret);
  s.addCredential('basic', cred('basic', 'basic_user = "bob"', allow('"/v1/*"')), secret);
  s.addCredential('q', cred('q', 'query = "api_key"', allow('"/v1/*"')), secret);
  s.addCredential(
    'pub',
    cred('pub', 'header = "Authorization"\ntemplate = "Bearer {secret}"', allow('"/public/*"', '"GET"')),
    secret,
  );
  await s.approver();

  const table = selectRows(t, P, secret);
  const requests = table.map((row, id) => wire(id, row, P));
  const file = join(s.h.dir, 'rows.json');
  writeFileSync(file, JSON.stringify(requests));
  const script = join(s.h.dir, 'client.js');
  writeFileSync(script, CLIENT);
  const run = await cliBytes(s.h.env, ['run', '--', process.execPath, script, file]);
  const out = run.stdout.toString();
  t.equal(run.code, 0, run.stderr);
  const answers = new Map<number, Answer>();
  for (const line of out.split('\n').filter(Boolean)) {
    const a = JSON.parse(line) as Answer;
    answers.set(a.id, a);
  }
  t.equal(answers.size, table.length, 'an answer for every row');

  let lastSeq = 0;
  const received: Buffer[] = [Buffer.from(out), Buffer.from(run.stderr)];
  for (const [id, row] of table.entries()) {
    await t.test(row.what, async (t) => {
      const a = answers.get(id);
      const raw = Buffer.from(a?.raw ?? '', 'base64');
      received.push(raw);
      t.notOk(a?.error, `answered (${a?.error})`);
      const r = parse(raw);
      const seen = s.up.requests.filter((q) => q.headers['x-row'] === String(id));
      const expect = throughProxy(row);
      if (row.code === undefined || (expect && 'removed' in expect)) {
        t.equal(r.status, 200, r.head + r.body.slice(0, 400));
        t.notOk(r.headers['x-postern-error'], 'no refusal');
        t.equal(seen.length, 1, 'the upstream saw the request once');
        const got = seen[0];
        if (!got) return;
        if (expect && 'removed' in expect) {
          t.not(got.headers[expect.removed], '1', `${expect.removed} is removed, not sent`);
          if (expect.removed === 'accept-encoding') t.equal(got.headers['accept-encoding'], 'identity');
          return;
        }
        if (row.seen)
          row.seen(t, got, { status: r.status, body: r.body, target: { host: HOST, address: '', port: P } });
        return;
      }
      const want = expect ?? { status: row.status, code: row.code, message: row.message };
      t.equal(r.status, want.status, r.head + r.body.slice(0, 400));
      t.equal(r.headers['x-postern-error'], want.code, 'x-postern-error');
      t.match(r.headers['content-type'], /^application\/json/);
      let err: { code?: string; message?: string; audit_seq?: unknown } | undefined;
      try {
        err = (JSON.parse(r.body) as { error: typeof err }).error;
      } catch {
        err = undefined;
      }
      t.equal(err?.code, want.code, 'the JSON code');
      if (want.message) t.match(err?.message, want.message);
      t.type(err?.audit_seq, 'number', 'the refusal is journaled');
      if (typeof err?.audit_seq === 'number') {
        t.ok(err.audit_seq > lastSeq, 'with a new journal entry');
        lastSeq = err.audit_seq;
      }
      t.equal(seen.length, 0, 'the upstream saw no such request');
    });
  }
  const served = table.filter((row) => row.code === undefined || 'removed' in (throughProxy(row) ?? {})).length;
  t.equal(s.up.requests.length, served, 'the upstream saw exactly the rows that are served');

  await s.d.stop();
  received.forEach((bytes, i) =>
    t.same(exposures(bytes, secret), [], `the client received no form of the secret (${i})`),
  );
  t.same(exposures(s.d.logs(), secret), [], 'the daemon log holds no form of the secret');
  t.same(exposures(journalBytes(s.h.home), secret), [], 'the journal files hold no form of the secret');
  t.same(exposures(await journalText(s.h), secret), [], 'no decrypted journal entry holds a form of the secret');
});
