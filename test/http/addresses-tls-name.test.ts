// The connection goes to the checked address while TLS keeps the name
// (SPEC §6.2: "TLS SNI, certificate verification and Host still use the
// name"), through the real daemon:
// - the upstream receives the request's host name as SNI, not the address
//   the name resolved to, and no SNI for an IP literal (RFC 6066 forbids
//   one);
// - a certificate that names only the address (IP:127.0.0.1), signed by the
//   trusted CA, is refused for a request to a name resolving to that
//   address: verification is against the name. The same certificate serves
//   a request whose URL is the literal 127.0.0.1, so the refusal is about
//   the name alone.
import t from 'tap';
import type { TLSSocket } from 'node:tls';
import { startStack, Stack } from '../helpers/stack';
import { echo, Handler } from '../helpers/https-upstream';
import { findCanary, makeCanary } from '../helpers/canary';

interface ErrorBody {
  error: { code: string; message: string; audit_seq: unknown };
}

// The echo, noting the SNI of the connection each request came on.
function recordingSni(seen: (string | false | undefined)[]): Handler {
  return (req, body, res) => {
    // Node sets `servername` on a server-side TLS socket; its types omit it.
    seen.push((req.socket as TLSSocket & { servername?: string | false }).servername);
    return echo(req, body, res);
  };
}

// A header credential allowed to `host` and to 127.0.0.1 on port `port`.
const apiAllowing = (host: string, port: number): string =>
  `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n` +
  `[[allow]]\nhost = "${host}"\nports = [${port}]\n[[allow]]\nhost = "127.0.0.1"\nports = [${port}]\n`;

t.test('SNI is the host name, and no SNI for an IP literal', async (t) => {
  const sni: (string | false | undefined)[] = [];
  const s: Stack = await startStack({
    names: ['sni.example.test', '127.0.0.1'],
    records: { 'sni.example.test': { A: ['127.0.0.1'] } },
    handler: recordingSni(sni),
  });
  t.teardown(() => s.close());
  const P = s.up.port;
  const secret = makeCanary('TOKEN');
  s.addCredential('api', apiAllowing('sni.example.test', P), secret);
  await s.approver();

  const byName = await s.request({ credential: 'api', method: 'GET', url: s.url('sni.example.test', '/a') });
  t.equal(byName.status, 200, byName.text);
  t.equal((byName.json as { target: { address: string } }).target.address, '127.0.0.1');
  t.same(sni, ['sni.example.test'], 'SNI named the host, not 127.0.0.1');

  const literal = await s.request({ credential: 'api', method: 'GET', url: s.url('127.0.0.1', '/b') });
  t.equal(literal.status, 200, literal.text);
  t.equal(sni.length, 2);
  t.notOk(sni[1], 'no SNI for the IP literal');
  t.same(findCanary(byName.text + literal.text, secret), []);
});

t.test('a certificate naming only the address is refused for a request to the name', async (t) => {
  // The upstream's certificate: SAN IP:127.0.0.1 alone, from the trusted CA.
  const s: Stack = await startStack({
    names: ['127.0.0.1'],
    records: { 'ip-only.example.test': { A: ['127.0.0.1'] } },
  });
  t.teardown(() => s.close());
  const P = s.up.port;
  const secret = makeCanary('TOKEN');
  s.addCredential('api', apiAllowing('ip-only.example.test', P), secret);
  await s.approver();

  const byName = await s.request({ credential: 'api', method: 'GET', url: s.url('ip-only.example.test', '/a') });
  t.equal(byName.status, 502, byName.text);
  const err = (byName.json as ErrorBody | null)?.error;
  t.equal(err?.code, 'upstream_error');
  t.match(err?.message, /TLS|certificate/);
  t.type(err?.audit_seq, 'number', 'the refusal is journaled');
  t.equal(s.up.requests.length, 0, 'the upstream received no request');

  const literal = await s.request({ credential: 'api', method: 'GET', url: s.url('127.0.0.1', '/b') });
  t.equal(literal.status, 200, `the same certificate serves the literal: ${literal.text}`);
  t.equal(s.up.requests.length, 1);
  t.equal(s.up.requests[0]!.url, '/b');
  t.same(findCanary(byName.text + literal.text, secret), []);
});
