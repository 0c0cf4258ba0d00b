// Crash safety of the audit journal (SPEC §9): a child process
// (test/helpers/journal-writer-driver.ts) appends continuously with 16
// concurrent writers, a signing key, small segments (frequent rotations)
// and vault entries, and is killed with SIGKILL at random moments, some
// during its start-up repair. After every kill:
//   - Journal.open succeeds (repairing a torn last write, completing a cut-short rotation),
//   - the offline verifier passes (the tail after the last checkpoint is unsigned: allowed),
//   - every entry the child acknowledged is in the journal with the same hash
//     (all of them against an independent reading, a sample through `contains`),
//   - the journal's vault state is at least the last acknowledged one,
//   - once a key is set and the journal closed, it verifies without any allowance.
// Every other round also simulates a power loss: the part of the last
// segment that no one was told is durable is cut at a random byte, which
// leaves torn lines and half-started segments (kill -9 alone rarely tears
// a write: the kernel finishes a pwrite it has begun).
// A new journal starts every ROUNDS_PER_JOURNAL kills so verification stays
// linear. POSTERN_JOURNAL_KILLS=N runs fewer. Run with
// `npx tap --timeout 2400 test/long/journal-kill9.test.ts`.
import t from 'tap';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawn } from 'node:child_process';
import { Journal } from '../../daemon/audit/journal';
import { segmentPath, sodiumReady } from '../../shared/audit-format';
import { AuditKeys, auditKeys, driverArgv, newJournal, readJournal, verify } from '../helpers/journal-writer-driver';

const KILLS = Number(process.env['POSTERN_JOURNAL_KILLS'] ?? 120);
const ROUNDS_PER_JOURNAL = 20;
const SEGMENT = 32 * 1024;

interface Acked {
  seq: number;
  hash: string;
}

interface Round {
  acks: Acked[];
  vault: { generation: number; hash: string } | null;
  ready: boolean;
}

// One life of the driver: started, killed after `delay` ms (counted from
// "ready", or from the spawn when `early`), its acknowledgements collected.
async function lifeOfDriver(file: string, keys: AuditKeys, delay: number, early: boolean): Promise<Round> {
  const [cmd, ...args] = driverArgv('run', file, String(SEGMENT), '16', keys.sign.privateKey.toString('hex'));
  const child = spawn(cmd as string, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const round: Round = { acks: [], vault: null, ready: false };
  let stderr = '';
  let buffered = '';
  const exited = new Promise<NodeJS.Signals | null>((resolve) =>
    child.once('exit', (_code, signal) => resolve(signal)),
  );
  let onReady: () => void = () => undefined;
  const ready = new Promise<void>((resolve) => {
    onReady = resolve;
  });
  child.stderr.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  child.stdout.on('data', (d: Buffer) => {
    buffered += d.toString();
    const lines = buffered.split('\n');
    buffered = lines.pop() as string; // an incomplete line is not an acknowledgement
    for (const line of lines) {
      const [what, seq, hash, generation, vaultHash] = line.split(' ');
      if (what === 'ready') {
        round.ready = true;
        onReady();
      } else if (what === 'ack' || what === 'vault') {
        round.acks.push({ seq: Number(seq), hash: hash as string });
        if (what === 'vault') round.vault = { generation: Number(generation), hash: vaultHash as string };
      }
    }
  });
  if (!early) await Promise.race([ready, exited]);
  await new Promise((r) => setTimeout(r, delay));
  child.kill('SIGKILL');
  const signal = await exited;
  if (signal !== 'SIGKILL') throw new Error(`the driver exited on its own (${String(signal)}): ${stderr}`);
  return round;
}

t.test(`${KILLS} kill -9s of a journal writer: always repairable, verifiable, nothing acknowledged lost`, async (t) => {
  await sodiumReady();
  const keys = auditKeys();
  const pub = keys.sign.publicKey.toString('base64');
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'postern-journal-kill9-'));
  t.teardown(() => fs.rmSync(root, { recursive: true, force: true }));

  let file = '';
  let acked = new Map<number, string>();
  let lastVault: { generation: number; hash: string } | null = null;
  let durable: { segment: number; size: number } | null = null;
  const seen = {
    powerCuts: 0,
    repairs: 0,
    tornLeft: 0,
    unstartedSegments: 0,
    restarts: 0,
    acks: 0,
    segments: 0,
    earlyKills: 0,
    failures: 0,
  };

  for (let round = 0; round < KILLS; round++) {
    if (round % ROUNDS_PER_JOURNAL === 0) {
      const dir = fs.mkdtempSync(path.join(root, 'j-'));
      file = await newJournal(dir, keys);
      acked = new Map();
      lastVault = null;
      durable = null;
    }
    const early = round % 10 === 9; // now and then during start-up and its repair
    if (early) seen.earlyKills += 1;
    const life = await lifeOfDriver(file, keys, Math.random() * (early ? 400 : 300), early);
    for (const a of life.acks) acked.set(a.seq, a.hash);
    if (life.vault) lastVault = life.vault;
    seen.acks += life.acks.length;
    seen.restarts += 1;

    // Every other round, a power loss as well: the end of the last segment
    // that nobody was told is durable is cut at a random byte.
    if (round % 2 === 1) {
      const before = readJournal(file);
      const last = before.segments - 1;
      const lastAck = Math.max(0, ...acked.keys());
      const ackedEntry = before.entries.find((e) => e.entry.seq === lastAck);
      let floor = ackedEntry?.segment === last ? ackedEntry.end : 0;
      if (durable?.segment === last) floor = Math.max(floor, durable.size);
      const size = fs.statSync(segmentPath(file, last)).size;
      if (size > floor) {
        fs.truncateSync(segmentPath(file, last), floor + Math.floor(Math.random() * (size - floor)));
        seen.powerCuts += 1;
      }
    }

    // What the kill left, before the writer looks at it.
    const left = readJournal(file);
    const repairsBefore = left.entries.filter((e) => e.entry.type === 'repair').length;
    if (left.tail > 0) seen.tornLeft += 1;
    if (left.entries.at(-1)!.segment < left.segments - 1) seen.unstartedSegments += 1;
    const j = await Journal.open({ path: file, segmentSize: SEGMENT });
    const r = readJournal(file);
    const problems: string[] = [...r.problems];
    if (r.entries.filter((e) => e.entry.type === 'repair').length > repairsBefore) seen.repairs += 1;
    seen.segments = Math.max(seen.segments, r.segments);

    const loose = await verify(file, { pubkey: pub, allowUnsignedTail: true });
    if (!loose.ok) problems.push(`verify after repair: ${loose.problem}`);
    const present = new Map(r.entries.map((e) => [e.entry.seq, e.hash]));
    for (const [seq, hash] of acked) {
      if (present.get(seq) !== hash) {
        problems.push(`acknowledged ${seq}:${hash} is not in the journal`);
        break;
      }
    }
    // Through the writer's own look-up too: the last acknowledgement and a sample.
    const sample = [...life.acks.slice(-1), ...life.acks.filter(() => Math.random() < 0.02)];
    for (const a of sample) if (!(await j.contains(a.seq, a.hash))) problems.push(`contains(${a.seq}) is false`);
    const v = j.latestVault();
    if (
      lastVault &&
      (!v ||
        v.generation < lastVault.generation ||
        (v.generation === lastVault.generation && v.vault_hash !== lastVault.hash))
    ) {
      problems.push(`vault state ${JSON.stringify(v)} is behind the acknowledged ${JSON.stringify(lastVault)}`);
    }
    if (v) lastVault = { generation: v.generation, hash: v.vault_hash }; // an unacknowledged vault entry may have landed

    await j.setSigningKey(keys.sign.privateKey);
    await j.close();
    // Written and closed by this test: durable whatever comes next.
    const closed = readJournal(file);
    durable = { segment: closed.segments - 1, size: fs.statSync(segmentPath(file, closed.segments - 1)).size };
    const strict = await verify(file, { pubkey: pub });
    if (!strict.ok) problems.push(`verify after close: ${strict.problem}`);

    if (problems.length > 0) {
      seen.failures += 1;
      t.fail(`round ${round} (${life.acks.length} acks, ready: ${life.ready}): ${problems.join('; ')}`);
      if (seen.failures >= 3) break;
    }
  }
  t.equal(seen.failures, 0, 'every round held');
  t.ok(seen.acks > KILLS * 10, `${seen.acks} acknowledged appends over ${seen.restarts} kills`);
  t.comment(
    `FIGURE journal kill -9: ${seen.restarts} kills (${seen.earlyKills} during start-up), ${seen.powerCuts} with the unacknowledged end cut at a random byte; ` +
      `left behind: ${seen.tornLeft} torn last lines, ` +
      `${seen.unstartedSegments} segments cut short while starting; ${seen.repairs} repair entries written; ` +
      `up to ${seen.segments} segments per journal; ${seen.acks} acknowledged appends checked`,
  );
});
