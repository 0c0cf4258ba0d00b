// SPEC §7 "at most 16 pending per process and max_pending in all, beyond
// that 429 busy": one process, one pid, never exits or execs. It
// opens 16 requests that wait for approval, then changes its own process
// title (Node's process.title rewrites /proc/<pid>/cmdline, which any
// process may do to itself) and opens more. It is still the same process:
// the 17th must be refused at once as 429 busy (limit per_process).
// max_pending is raised to 64 so that only the per-process limit can answer.
import t from 'tap';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startStack } from '../helpers/stack';

const SCRIPT = String.raw`
const http = require('http');
const [sock, url] = process.argv.slice(2);
const out = (m) => process.stdout.write(JSON.stringify(m) + '\n');
function ask(i) {
  const body = JSON.stringify({ credential: 'api', method: 'GET', url });
  const req = http.request({ socketPath: sock, path: '/v1/http', method: 'POST', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
    let text = '';
    res.on('data', (d) => (text += d));
    res.on('end', () => out({ i, status: res.statusCode, text }));
  });
  req.on('error', (e) => out({ i, error: String(e) }));
  req.end(body);
}
for (let i = 1; i <= 16; i++) ask(i);
setTimeout(() => {
  process.title = 'renamed-by-itself';
  out({ retitled: true, pid: process.pid });
  for (let i = 17; i <= 20; i++) ask(i);
}, 2500);
setTimeout(() => process.exit(0), 7000);
`;

t.test('a process cannot exceed 16 pending approvals by rewriting its own title', async (t) => {
  const s = await startStack({ config: 'max_pending = 64\napproval_timeout = "60s"' });
  t.teardown(() => s.close());
  s.addCredential(
    'api',
    `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${s.up.port}]\nmethods = ["GET"]\npaths = ["/v1/*"]\n`,
    'pending-title-secret-0123456789',
  );
  const seen: { pid: number; key: string }[] = [];
  await s.approver((card) => {
    seen.push({ pid: card.process.pid, key: card.process.key });
    return null; // the human is away: every card stays pending
  });
  const dir = mkdtempSync(join(tmpdir(), 'pt-probe-title-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'flood.js');
  writeFileSync(file, SCRIPT);
  const p = spawn(
    '/usr/bin/env',
    [
      '-u',
      'NODE_OPTIONS',
      process.execPath,
      file,
      s.sock,
      s.url('api.example.test', '/v1/x'),
      'padding-argument-to-make-room-for-a-title',
    ],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  let text = '';
  p.stdout.on('data', (d: Buffer) => (text += d.toString()));
  await new Promise((r) => p.on('close', r));
  const lines = text
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  const replies = new Map(lines.filter((l) => typeof l['i'] === 'number').map((l) => [l['i'] as number, l]));
  const pid = lines.find((l) => l['retitled'])?.['pid'];
  t.ok(pid, 'the process retitled itself');
  const before = seen.filter((c) => c.pid === pid).length;
  t.ok(before >= 16, `16 cards were shown for pid ${String(pid)} before the title change (${before})`);
  const extra = [17, 18, 19, 20].map((i) => replies.get(i));
  const busy = extra.filter((r) => r?.['status'] === 429).length;
  t.equal(
    busy,
    4,
    `requests 17..20 of the same pid must be 429 busy at once; replies: ${JSON.stringify(extra.map((r) => r?.['status'] ?? 'still pending'))}; cards shown for this pid: ${seen.filter((c) => c.pid === pid).length}, distinct instance keys: ${new Set(seen.filter((c) => c.pid === pid).map((c) => c.key)).size}`,
  );
});
