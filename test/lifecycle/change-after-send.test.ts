// A credential changed after a request was sent: the request completes
// (SPEC §6.1: past its intent a request completes and is journaled as
// usual; docs/credentials.md, "The definition in force"). The upstream
// answers the head and a first part at once and the rest only after the
// change returned: a rotation (same definition, a new secret), a narrowing
// that no longer allows the request's path, and a removal. Each must reach
// the agent whole on the JSON door and through `postern run`; a later
// request is judged under the change. (The credential's connections used to
// be destroyed by the change: a 502 upstream_error on the JSON door, a body
// cut after its head through the proxy.)
import t from 'tap';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { startStack, type Stack } from '../helpers/stack';
import { cliBytes } from '../helpers/cli-bytes';
import { makeCanary } from '../helpers/canary';
import { code, credRm, credUpdate, httpDef } from '../helpers/lifecycle';
import { eventually } from '../helpers/postern';
import type { Result } from '../helpers/postern';

const UNDICI = JSON.stringify(require.resolve('undici'));
const held: ServerResponse[] = [];
let seen = 0;
const handler = (req: IncomingMessage, _body: Buffer, res: ServerResponse): void => {
  seen += 1;
  res.writeHead(200, { 'content-type': 'text/plain' });
  res.write(`first part of ${req.url}\n`);
  held.push(res);
};
const release = (): void => {
  for (const r of held.splice(0)) r.end('the end\n');
};

// name → the change made while its request is answered, and what a later
// request on the JSON door gets.
const CHANGES: [string, (s: Stack, name: string) => Promise<Result>, string][] = [
  ['rotation', (s, name) => credUpdate(s, name, def(s, name), makeCanary('NEWSECRET')), 'ok'],
  ['narrowing', (s, name) => credUpdate(s, name, def(s, name, ['/elsewhere/*'])), 'denied_policy'],
  ['removal', (s, name) => credRm(s, name), 'unknown_credential'],
];

function def(s: Stack, name: string, paths = ['/*']): string {
  return httpDef(name, s.up.port, { paths, extra: `env = ["${name.toUpperCase()}_TOKEN"]\n` });
}

const CLIENT = `const undici = require(${UNDICI});
(async () => {
  const dispatcher = new undici.EnvHttpProxyAgent();
  try {
    const res = await undici.request(process.argv[2], { headers: { authorization: 'Bearer ' + process.env[process.argv[3]] }, dispatcher });
    let body = '';
    try { body = await res.body.text(); } catch (e) { body += '<<' + e.code + '>>'; }
    console.log(JSON.stringify({ status: res.statusCode, body }));
  } catch (e) { console.log(JSON.stringify({ error: e.code + ' ' + e.message })); }
  await dispatcher.destroy();
})();
`;

t.test('a credential changed while a sent request is still being answered', async (t) => {
  const s = await startStack({ handler });
  t.teardown(async () => {
    for (const r of held.splice(0)) r.destroy();
    await s.close();
  });
  await s.approver(); // a session for each requester
  const client = join(s.h.dir, 'client.js');
  writeFileSync(client, CLIENT);

  for (const [what, change, later] of CHANGES) {
    await t.test(`${what}, JSON door: the request completes`, async (t) => {
      const name = `json${what}`;
      s.addCredential(name, def(s, name), makeCanary('OLDSECRET'));
      seen = 0;
      const p = s.request({ credential: name, method: 'GET', url: s.url('api.example.test', '/json') });
      t.ok(await eventually(() => seen === 1, 15_000), 'the upstream has the request and answers part of it');
      const u = await change(s, name);
      t.equal(u.code, 0, `the change returned ${u.stderr}`);
      release();
      const r = await p;
      t.equal(r.status, 200, `answered as a success: ${r.text.slice(0, 300)}`);
      t.match((r.json as { body?: string } | null)?.body ?? '', /first part of \/json\nthe end\n/, 'the whole body');
      const next = s.request({ credential: name, method: 'GET', url: s.url('api.example.test', '/json') });
      if (later === 'ok') {
        t.ok(await eventually(() => seen === 2, 15_000), 'a later request goes out');
        release();
        t.equal((await next).status, 200, 'and is answered');
      } else t.equal(code(await next), later, `a later request: ${later}`);
    });

    await t.test(`${what}, through postern run: the streamed response is not cut`, async (t) => {
      const name = `proxy${what}`;
      s.addCredential(name, def(s, name), makeCanary('OLDSECRET'));
      seen = 0;
      const url = s.url('api.example.test', '/proxy');
      const run = cliBytes(s.h.env, ['run', '--', process.execPath, client, url, `${name.toUpperCase()}_TOKEN`]);
      t.ok(await eventually(() => seen === 1, 20_000), 'the upstream has the request and answers part of it');
      const u = await change(s, name);
      t.equal(u.code, 0, `the change returned ${u.stderr}`);
      release();
      const r = await run;
      const out = r.stdout.toString().trim();
      t.match(out, /"status":200/, `the head arrived: ${out}`);
      t.match(out, /first part of \/proxy\\nthe end\\n/, 'and the whole body, not a connection closed mid-body');
    });
  }
});
