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
import { startStack } from '../helpers/stack';
import { parseRaw, sendRaw, type Wire } from '../helpers/proxy-raw-client';
import { makeCanary, journalText, journalBytes } from '../helpers/canary';
import { exposures } from '../helpers/exposure';
import type { Row } from '../helpers/request-rows';
import { hostilePathRows, hostileRequestRows, hostileUrlRows } from '../helpers/hostile-rows';

const HOST = 'api.example.test';

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
  const run = await sendRaw(s.h, requests);
  const out = run.stdout.toString();
  t.equal(run.code, 0, run.stderr);
  const answers = run.answers;
  t.equal(answers.size, table.length, 'an answer for every row');

  let lastSeq = 0;
  const received: Buffer[] = [Buffer.from(out), Buffer.from(run.stderr)];
  for (const [id, row] of table.entries()) {
    await t.test(row.what, async (t) => {
      const a = answers.get(id);
      const raw = Buffer.from(a?.raw ?? '', 'base64');
      received.push(raw);
      t.notOk(a?.error, `answered (${a?.error})`);
      const r = parseRaw(raw);
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
