// Headers postern sends besides the agent's (SPEC §4 [headers], §6.2),
// through the real daemon to a real HTTPS upstream that records the raw
// header lines: `User-Agent: postern/<version>` when neither the agent nor
// the credential sets one; a credential's [headers] the agent did not set;
// the agent's own value wins (any case) and is never sent twice; an agent
// header spelled with "_" for "-" of a forbidden or injected header is
// refused before anything is sent. The secret appears only where [inject]
// puts it.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startStack } from '../helpers/stack';
import { ROOT } from '../helpers/postern';
import { findCanary, journalText, makeCanary } from '../helpers/canary';

const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

// Raw header lines as received: [name, value] in order, names lower-cased.
type Lines = [string, string][];

t.test("default User-Agent and a credential's [headers]", async (t) => {
  const seen: Lines[] = [];
  const s = await startStack({
    handler: (req, _body, res) => {
      const lines: Lines = [];
      for (let i = 0; i < req.rawHeaders.length; i += 2)
        lines.push([req.rawHeaders[i]!.toLowerCase(), req.rawHeaders[i + 1]!]);
      seen.push(lines);
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('ok');
    },
  });
  t.teardown(() => s.close());
  const P = s.up.port;
  const secret = makeCanary('UA');
  const rule = `[[allow]]\nhost = "api.example.test"\nports = [${P}]\nmethods = ["GET", "POST"]\n`;
  const inject = `[inject]\nheader = "X-Api-Key"\ntemplate = "{secret}"\n`;
  s.addCredential(
    'plain',
    `name = "plain"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n${inject}${rule}`,
    secret,
  );
  s.addCredential(
    'dressed',
    `name = "dressed"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[headers]\nUser-Agent = "acme-agent/3"\nX-GitHub-Api-Version = "2022-11-28"\nAccept = "application/vnd.github+json"\n${inject}${rule}`,
    secret,
  );
  await s.approver();

  const replies: string[] = [];
  const send = async (
    credential: string,
    headers: Record<string, string> = {},
  ): Promise<{ status: number; lines: Lines; json: unknown }> => {
    const before = seen.length;
    const r = await s.request({ credential, method: 'GET', url: s.url('api.example.test', '/x'), headers });
    replies.push(r.text);
    return { status: r.status, lines: seen.length > before ? seen.at(-1)! : [], json: r.json };
  };
  const values = (lines: Lines, name: string): string[] => lines.filter(([n]) => n === name).map(([, v]) => v);

  await t.test('neither sets one: postern/<version>', async (t) => {
    const r = await send('plain');
    t.equal(r.status, 200);
    t.same(values(r.lines, 'user-agent'), [`postern/${VERSION}`]);
    t.same(values(r.lines, 'x-api-key'), [secret], 'the secret where [inject] puts it');
    t.same(values(r.lines, 'accept-encoding'), ['identity']);
  });

  await t.test("the agent sets one, in any case: sent once, the agent's", async (t) => {
    for (const name of ['User-Agent', 'user-agent', 'USER-AGENT']) {
      const r = await send('plain', { [name]: 'my-agent/1' });
      t.equal(r.status, 200);
      t.same(values(r.lines, 'user-agent'), ['my-agent/1'], name);
    }
  });

  await t.test("the credential's [headers] are sent unless the agent sets them", async (t) => {
    const r = await send('dressed');
    t.same(values(r.lines, 'user-agent'), ['acme-agent/3'], "the credential's User-Agent, not postern's");
    t.same(values(r.lines, 'x-github-api-version'), ['2022-11-28']);
    t.same(values(r.lines, 'accept'), ['application/vnd.github+json']);
    const mine = await send('dressed', {
      accept: 'text/plain',
      'X-GITHUB-API-VERSION': '2026-01-01',
      'user-agent': 'mine/2',
    });
    t.same(values(mine.lines, 'accept'), ['text/plain'], "the agent's Accept, once");
    t.same(values(mine.lines, 'x-github-api-version'), ['2026-01-01']);
    t.same(values(mine.lines, 'user-agent'), ['mine/2']);
  });

  await t.test('look-alikes with "_" are refused before anything is sent', async (t) => {
    for (const [name, code] of [
      ['Content_Length', 'bad_request'],
      ['Transfer_Encoding', 'bad_request'],
      ['X_Forwarded_For', 'bad_request'],
      ['X_Api_Key', 'bad_request'],
      ['x-api_key', 'bad_request'],
    ] as const) {
      const before = seen.length;
      const r = await send('plain', { [name]: '40' });
      t.equal(r.status, 400, name);
      t.match(r.json, { error: { code, message: new RegExp(`header "${name.toLowerCase()}" may not be sent`) } }, name);
      t.equal(seen.length, before, `${name}: nothing reached the upstream`);
    }
  });

  t.same(findCanary(replies.join('\n'), secret), [], 'no form of the secret in any reply');
  t.same(findCanary(s.d.logs(), secret), [], 'nor in the daemon log');
  t.same(findCanary(await journalText(s.h), secret), [], 'nor in the decrypted journal');
});
