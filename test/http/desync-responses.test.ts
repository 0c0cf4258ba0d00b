// A desynced upstream on the JSON front door (SPEC §6.2 with §7): the origin
// answers GET /late with a response whose Content-Length covers its body,
// then writes a forged response 50 ms later, unasked. HTTP/1.1 takes those
// bytes for the answer to whatever request goes out next on that kept-alive
// connection, and every later answer on it for the request after its own.
// Upstream connections are pooled per requester (the agent's process
// instance), so the confusion cannot cross to another process: one agent
// process asks for /late forty times, each followed by an ordinary GET,
// while four other agent processes (real child processes, each approved
// for itself) send GETs on the same credential. Each of the four gets the
// answer to each of its own requests, never the forgery, never another
// process's; with one pool for every requester they got the forger's and
// each other's answers. Every request reached the origin once, and no form
// of the secret is in what the agents printed, the daemon log or the
// journal.
import t from 'tap';
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startStack, Stack } from '../helpers/stack';
import { header, rawResponse, startRawOrigin, type RawOrigin } from '../helpers/raw-origin';
import { findCanary, journalBytes, journalText, makeCanary } from '../helpers/canary';
import { exposures } from '../helpers/exposure';

const HOST = 'api.example.test';
const LATER_MS = 50;

// An agent as its own process: GETs each path of its list in turn over the
// agent socket and prints, for each, the tag it sent and the tag it got.
const AGENT = String.raw`
const http = require('node:http');
const [sock, port, who, list] = process.argv.slice(2);
const paths = JSON.parse(list);
function get(path, tag) {
  return new Promise((resolve, reject) => {
    const body = Buffer.from(JSON.stringify({ credential: 'late', method: 'GET', url: 'https://${HOST}:' + port + path, headers: { 'x-tag': tag }, timeout_ms: 5000 }));
    const req = http.request({ socketPath: sock, method: 'POST', path: '/v1/http', agent: keep, headers: { 'content-type': 'application/json', 'content-length': body.length } }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    });
    req.on('error', reject);
    req.end(body);
  });
}
const keep = new http.Agent({ keepAlive: true, maxSockets: 1 });
(async () => {
  for (let i = 0; i < paths.length; i++) {
    const tag = who + '.' + i;
    const text = await get(paths[i], tag);
    let got = null;
    try { got = JSON.parse(JSON.parse(text).body).tag; } catch { got = 'unreadable: ' + text.slice(0, 200); }
    process.stdout.write(JSON.stringify({ tag, path: paths[i], got }) + '\n');
  }
  keep.destroy();
})();
`;

interface Line {
  tag: string;
  path: string;
  got: string;
}

const printed: string[] = [];

function agent(s: Stack, script: string, port: number, who: string, paths: string[]): Promise<Line[]> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [script, s.sock, String(port), who, JSON.stringify(paths)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    p.stdout.on('data', (d: Buffer) => (out += d.toString()));
    p.stderr.on('data', (d: Buffer) => (err += d.toString()));
    p.on('close', (code) => {
      printed.push(out, err);
      return code === 0
        ? resolve(
            out
              .split('\n')
              .filter(Boolean)
              .map((l) => JSON.parse(l) as Line),
          )
        : reject(new Error(`agent ${who} exited ${code}: ${err}`));
    });
  });
}

function json(tag: string): Buffer {
  const text = JSON.stringify({ tag });
  return rawResponse(
    200,
    [
      ['Content-Type', 'application/json'],
      ['Content-Length', String(text.length)],
    ],
    text,
  );
}

let s: Stack;
let origin: RawOrigin;
const seen: string[] = [];
const secret = makeCanary('LATE');

t.before(async () => {
  s = await startStack();
  origin = await startRawOrigin({ tls: { key: s.ca.key, cert: s.ca.cert }, honourClose: false }, (head) => {
    const tag = header(head, 'x-tag') ?? '';
    seen.push(tag);
    if (head.target === '/late')
      return { read: 'declared', respond: () => json(tag), later: { ms: LATER_MS, bytes: json('FORGED') } };
    return { read: 'declared', respond: () => json(tag) };
  });
  s.addCredential(
    'late',
    `name = "late"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "${HOST}"\nports = [${origin.port}]\nmethods = ["GET"]\npaths = ["/*"]\n`,
    secret,
  );
  await s.approver();
});
t.teardown(async () => {
  await origin.close();
  await s.close();
});

t.test('forty late forgeries beside four busy agent processes: each process gets its own answers', async (t) => {
  const script = join(s.h.dir, 'desync-agent.js');
  writeFileSync(script, AGENT);
  const forger = Array.from({ length: 40 }, () => ['/late', '/tag']).flat();
  const busy = Array.from({ length: 80 }, () => '/tag');
  const [forged, ...others] = await Promise.all([
    agent(s, script, origin.port, 'forger', forger),
    ...[1, 2, 3, 4].map((i) => agent(s, script, origin.port, `busy${i}`, busy)),
  ]);
  t.equal(forged!.length, forger.length, 'the forger got an answer to every request');
  for (const [i, lines] of others.entries()) {
    t.equal(lines.length, busy.length, `busy agent ${i + 1}: an answer to every request`);
    t.same(
      lines.filter((l) => l.got !== l.tag),
      [],
      `busy agent ${i + 1}: every answer its own (none forged, none another process's)`,
    );
  }
  t.same(
    forged!.filter((l) => l.got !== l.tag && l.got !== 'FORGED' && !l.got.startsWith('forger.')),
    [],
    "the forger's confusion stays its own: any wrong answer it got is the forgery or one of its own",
  );
  const sent = [...forged!, ...others.flat()].map((l) => l.tag);
  t.same(
    sent.filter((tag) => seen.filter((x) => x === tag).length !== 1),
    [],
    'every request reached the origin once',
  );
});

t.test('no form of the secret in what the agents printed, the daemon log or the journal', async (t) => {
  t.ok(printed.length >= 10, `${printed.length} outputs`);
  t.same(exposures(printed.join('\n'), secret), [], 'what the agents printed');
  await s.d.stop();
  t.same(exposures(s.d.logs(), secret), [], 'the daemon log');
  t.same(findCanary(journalBytes(s.h.home), secret), [], 'the journal files');
  t.same(exposures(await journalText(s.h), secret), [], 'the decrypted journal');
});
