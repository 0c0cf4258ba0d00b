// A full disk under the journal, through the real daemon: the journal lives
// on a small tmpfs this test mounts (we run as root). When the intent cannot
// be written the request is refused with 503 audit_unavailable and nothing
// reaches the upstream; the daemon keeps answering; once there is space
// again requests go through; every acknowledged entry is still there and
// the journal verifies. An unlock or a session grant the journal cannot
// record does not happen.
import t from 'tap';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { execFileSync } from 'node:child_process';
import type { Test } from 'tap';
import { startStack, auditList, Stack } from '../helpers/stack';
import { agentRequest, cli, cliAsync } from '../helpers/postern';

// A tmpfs of 256 KiB for the journal, unmounted at the end.
function smallDisk(t: Test): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'postern-fulldisk-'));
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=256k,mode=0700', 'tmpfs', dir]);
  t.teardown(() => {
    execFileSync('umount', ['-l', dir]);
    fs.rmdirSync(dir);
  });
  return dir;
}

// Fills the disk, leaving `left` bytes; returns the filler to remove.
function fill(dir: string, left: number): string {
  const st = fs.statfsSync(dir);
  const free = Number(st.bavail) * Number(st.bsize);
  const filler = path.join(dir, 'filler');
  fs.writeFileSync(filler, Buffer.alloc(Math.max(0, free - left), 1));
  return filler;
}

// A tmpfs file grows within its last page without new space: refused
// requests are journaled until one cannot be, and then the journal is full.
async function exhaust(t: Test, s: Stack): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const r = await s.request({ credential: 'api', method: 'GET', url: s.url('api.example.test', '/not-allowed') });
    const err = (r.json as { error?: { code: string; audit_seq?: number } }).error;
    if (err && err.audit_seq === undefined) return;
  }
  t.fail('the journal never filled up');
}

async function fullDiskStack(t: Test): Promise<{ s: Stack; dir: string }> {
  const dir = smallDisk(t);
  const s = await startStack({ config: `audit_log = "${dir}/audit.log"` });
  t.teardown(() => s.close());
  s.addCredential(
    'api',
    `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${s.up.port}]\npaths = ["/v1/*"]\n`,
    'disk-full-test-secret-0123456789',
  );
  return { s, dir };
}

t.test('ENOSPC under the journal: refused before sending, served again once there is space', async (t) => {
  const { s, dir } = await fullDiskStack(t);
  await s.approver();
  const get = (p: string) => s.request({ credential: 'api', method: 'GET', url: s.url('api.example.test', p) });

  let r = await get('/v1/first');
  t.equal(r.status, 200, r.text);
  const acknowledged = [(r.json as { audit_seq: number }).audit_seq];

  // Leave about 1.5 KiB free: less than a request's entries need.
  const filler = fill(dir, 1536);

  // A request whose intent fits and whose outcome does not was sent: it is
  // told maybe_executed with its intent's seq (disk-full-outcome covers
  // it). The loop goes on to the request refused before it was sent.
  type Refused = { code: string; message: string; maybe_executed?: boolean; audit_seq?: number };
  let refused: { status: number; error: Refused } | null = null;
  const sentBefore = s.up.requests.length;
  let served = 0;
  let sentThenRefused = 0;
  for (let i = 0; i < 20 && !refused; i++) {
    r = await get(`/v1/fill-${i}`);
    if (r.status === 200) {
      served += 1;
      acknowledged.push((r.json as { audit_seq: number }).audit_seq);
      continue;
    }
    const error = (r.json as { error: Refused }).error;
    if (error.maybe_executed === true) {
      t.equal(error.code, 'audit_unavailable', 'an outcome the journal could not take');
      t.type(error.audit_seq, 'number', 'it names the intent that was written');
      acknowledged.push(error.audit_seq!);
      sentThenRefused += 1;
    } else refused = { status: r.status, error };
  }
  t.ok(refused, 'a request was refused once the disk was full');
  t.equal(refused!.status, 503);
  const err = refused!.error;
  t.equal(err.code, 'audit_unavailable');
  t.match(err.message, /journal|audit/i, 'the message says the journal could not be written');
  t.equal(err.audit_seq, undefined, 'no entry is named: its intent was not written');
  t.equal(
    s.up.requests.length,
    sentBefore + served + sentThenRefused,
    'the refused request never reached the upstream',
  );

  // The daemon keeps answering.
  const health = await agentRequest(s.sock, 'GET', '/v1/health');
  t.equal(health.status, 200);

  // Space again: requests go through.
  fs.rmSync(filler);
  r = await get('/v1/after');
  t.equal(r.status, 200, `served again once there is space: ${r.text}`);
  acknowledged.push((r.json as { audit_seq: number }).audit_seq);

  // Nothing acknowledged is lost, and the journal verifies.
  const seqs = new Set(auditList<{ seq: number }>(s).map((e) => e.seq));
  for (const seq of acknowledged) t.ok(seqs.has(seq), `entry ${seq} is in the journal`);
  await s.d.stop();
  const v = cli(s.h, ['audit', 'verify', '--json']);
  t.equal(v.code, 0, v.stdout + v.stderr);
});

t.test('ENOSPC: an unlock the journal cannot record leaves the daemon locked', async (t) => {
  const { s, dir } = await fullDiskStack(t);
  t.equal(cli(s.h, ['lock']).code, 0, 'locked');
  const filler = fill(dir, 0);
  await exhaust(t, s);
  const u = await cliAsync(s.h, ['unlock', '--passphrase-file', s.h.passFile, '--json']);
  t.equal(u.code, 1, 'the unlock is refused');
  t.equal(JSON.parse(u.stdout).error.code, 'audit_unavailable');
  t.match(u.stderr, /^postern: .*audit.*(ENOSPC|no space)/i, `it says the journal could not be written: ${u.stderr}`);
  const st = JSON.parse((await cliAsync(s.h, ['status', '--json'])).stdout) as { locked: boolean; lock_reason: string };
  t.equal(st.locked, true, 'the daemon is still locked');
  t.equal(st.lock_reason, 'the audit journal could not record the unlock');
  const r = await s.request({ credential: 'api', method: 'GET', url: s.url('api.example.test', '/v1/x') });
  t.equal(r.status, 423);
  t.equal(
    (r.json as { error: { code: string } }).error.code,
    'vault_locked',
    'agents are refused: the vault is not open',
  );
  t.equal(s.up.requests.length, 0, 'nothing sent');

  fs.rmSync(filler);
  const again = await cliAsync(s.h, ['unlock', '--passphrase-file', s.h.passFile]);
  t.equal(again.code, 0, `unlocked once there is space: ${again.stderr}`);
  const unlocks = auditList<{ kind?: string; outcome?: string }>(s).filter(
    (e) => e.kind === 'unlock' && e.outcome === 'ok',
  );
  t.equal(
    unlocks.length,
    2,
    'the journal holds both successful unlocks (start, and after the space came back), not the refused one',
  );
});

t.test('ENOSPC: a session the journal cannot record is not granted', async (t) => {
  const { s, dir } = await fullDiskStack(t);
  let cards = 0;
  await s.approver((card) => {
    cards += 1;
    return { decision: 'session', root_key: card.process.key };
  });
  // The agent is one long-lived process, so a stored session would cover
  // its second request. It asks each time it reads a line.
  const agent = `
    const http = require('node:http');
    const ask = () => new Promise((resolve) => {
      const body = JSON.stringify({ credential: 'api', method: 'GET', url: process.argv[2] });
      const req = http.request({ socketPath: process.argv[1], method: 'POST', path: '/v1/http', headers: { 'content-type': 'application/json' } }, (res) => {
        let text = ''; res.on('data', (d) => (text += d)); res.on('end', () => resolve(res.statusCode + ' ' + text));
      });
      req.end(body);
    });
    (async () => {
      for (let i = 0; i < 2; i++) {
        await new Promise((r) => process.stdin.once('data', r));
        process.stdout.write((await ask()) + '\\n');
      }
    })();
  `;
  const { spawn } = await import('node:child_process');
  const child = spawn(
    '/usr/bin/env',
    ['-u', 'NODE_OPTIONS', process.execPath, '-e', agent, s.sock, s.url('api.example.test', '/v1/items')],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  t.teardown(() => child.kill());
  const lines: string[] = [];
  let wake: (() => void) | null = null;
  child.stdout.on('data', (d: Buffer) => {
    lines.push(...d.toString().split('\n').filter(Boolean));
    wake?.();
  });
  const nextLine = async (n: number): Promise<string> => {
    while (lines.length < n) await new Promise<void>((r) => (wake = r));
    return lines[n - 1]!;
  };

  const filler = fill(dir, 0);
  await exhaust(t, s);
  child.stdin.write('\n');
  const first = await nextLine(1);
  t.match(first, /^503 .*"code":"audit_unavailable"/, `refused: ${first}`);
  t.equal(cards, 1, 'the human was asked once');
  const st = JSON.parse((await cliAsync(s.h, ['status', '--json'])).stdout) as { sessions: unknown[] };
  t.same(st.sessions, [], 'no session was stored');
  t.equal(s.up.requests.length, 0, 'nothing sent');

  fs.rmSync(filler);
  child.stdin.write('\n');
  const second = await nextLine(2);
  t.match(second, /^200 /, `served: ${second}`);
  t.equal(cards, 2, 'the same process was asked again: the first grant never existed');
  const starts = auditList<{ kind?: string }>(s).filter((e) => e.kind === 'session_start');
  t.equal(starts.length, 1, 'one session_start in the journal, the one that was granted');
});
