// Hostile request fields through the real daemon (SPEC §6.1–§6.3): every
// forbidden header of the daemon's own table (in two spellings), the
// injected header, Authorization for a basic credential, the injected query
// parameter, CR/LF/NUL in header names and values, bodies (both forms, over
// max_request_body, malformed), malformed JSON, bad fields, an unknown
// credential and an SSH credential on /v1/http. One TABLE of rows; each
// asserts the exact status and code, or success with what the upstream
// received. For every refusal: the upstream saw no request and no
// connection, and the refusal is journaled (a new audit_seq).
//
// Only 127.0.0.1 is ever connected to: the approver approves nothing else.
import t from 'tap';
import { startStack, Stack } from '../helpers/stack';
import { makeCanary } from '../helpers/canary';
import { runRows } from '../helpers/request-rows';
import { hostileRequestRows } from '../helpers/hostile-rows';

t.test('hostile request fields through the real daemon', async (t) => {
  const s: Stack = await startStack();
  t.teardown(() => s.close());
  const P = s.up.port;
  const secret = makeCanary('TOKEN');
  s.addCredential(
    'api',
    `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "X-Api-Key"\ntemplate = "Key {secret}"\n` +
      `[[allow]]\nhost = "api.example.test"\nports = [${P}]\nmethods = ["GET", "POST"]\npaths = ["/v1/*"]\n`,
    secret,
  );
  s.addCredential(
    'basic',
    `name = "basic"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nbasic_user = "bob"\n[[allow]]\nhost = "api.example.test"\nports = [${P}]\npaths = ["/v1/*"]\n`,
    secret,
  );
  s.addCredential(
    'q',
    `name = "q"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nquery = "api_key"\n[[allow]]\nhost = "api.example.test"\nports = [${P}]\npaths = ["/v1/*"]\n`,
    secret,
  );
  s.addCredential(
    'box',
    `name = "box"\nkind = "ssh"\nhost = "127.0.0.1"\nport = 22\nuser = "deploy"\nauth = "password"\nhost_key = "SHA256:+DiY3wvvV6TuJJhbpZisF/zLDA0zPMSvHdkr4UvCOqU"\ncommands = ["true"]\n`,
    secret,
  );
  await s.approver((card) =>
    card.action['address'] === '127.0.0.1' ? { decision: 'session', root_key: card.process.key } : { decision: 'deny' },
  );

  await runRows(t, s, hostileRequestRows(P, secret), secret);
});
