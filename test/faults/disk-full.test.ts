// A full disk under the journal, through the real daemon: the journal lives
// on a small tmpfs this test mounts (we run as root). When the intent cannot
// be written the request is refused with 503 audit_unavailable and nothing
// reaches the upstream; the daemon keeps answering; once there is space
// again requests go through; every acknowledged entry is still there and
// the journal verifies.
import t from 'tap';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { execFileSync } from 'node:child_process';
import { startStack, auditList } from '../helpers/stack';
import { agentRequest, cli } from '../helpers/postern';

t.test('ENOSPC under the journal: refused before sending, served again once there is space', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'postern-fulldisk-'));
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=256k,mode=0700', 'tmpfs', dir]);
  t.teardown(() => {
    execFileSync('umount', ['-l', dir]);
    fs.rmdirSync(dir);
  });
  const s = await startStack({ config: `audit_log = "${dir}/audit.log"` });
  t.teardown(() => s.close());
  s.addCredential('api', `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${s.up.port}]\npaths = ["/v1/*"]\n`, 'disk-full-test-secret-0123456789');
  await s.approver();
  const get = (p: string) => s.request({ credential: 'api', method: 'GET', url: s.url('api.example.test', p) });

  let r = await get('/v1/first');
  t.equal(r.status, 200, r.text);
  const acknowledged = [(r.json as { audit_seq: number }).audit_seq];

  // Leave about 1.5 KiB free: less than a request's entries need.
  const st = fs.statfsSync(dir);
  const free = Number(st.bavail) * Number(st.bsize);
  const filler = path.join(dir, 'filler');
  fs.writeFileSync(filler, Buffer.alloc(Math.max(0, free - 1536), 1));

  let refused: { status: number; json: unknown } | null = null;
  const sentBefore = s.up.requests.length;
  let served = 0;
  for (let i = 0; i < 20 && !refused; i++) {
    r = await get(`/v1/fill-${i}`);
    if (r.status === 200) {
      served += 1;
      acknowledged.push((r.json as { audit_seq: number }).audit_seq);
    } else refused = r;
  }
  t.ok(refused, 'a request was refused once the disk was full');
  t.equal(refused!.status, 503);
  const err = (refused!.json as { error: { code: string; message: string } }).error;
  t.equal(err.code, 'audit_unavailable');
  t.match(err.message, /journal|audit/i, 'the message says the journal could not be written');
  t.equal(s.up.requests.length, sentBefore + served, 'the refused request never reached the upstream');

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
