// The daemon log's `pid` is the daemon's own, once per line. The process a
// request came from is `peer_pid` (journal payloads call it `pid`; in the log
// it would otherwise be a second `pid` key, and `jq .pid` shows the last).
// The raw text is read, since JSON.parse keeps only one of two equal keys.
import t from 'tap';
import { agentRequest, cli, init, makeHome, startDaemon } from '../helpers/postern';
import { join } from 'node:path';

// Top-level keys of one JSON object, in order, duplicates kept: the values
// are skipped by parsing them one at a time from the raw text.
function topLevelKeys(line: string): string[] {
  const keys: string[] = [];
  let i = 1;
  const skipValue = (): void => {
    let depth = 0;
    for (; i < line.length; i++) {
      const ch = line[i];
      if (ch === '"') {
        for (i++; line[i] !== '"'; i++) if (line[i] === '\\') i++;
      } else if (ch === '{' || ch === '[') depth++;
      else if (ch === '}' || ch === ']') {
        if (depth === 0) return;
        depth--;
      } else if (ch === ',' && depth === 0) return;
    }
  };
  while (i < line.length && line[i] === '"') {
    const end = line.indexOf('":', i + 1);
    keys.push(JSON.parse(line.slice(i, end + 1)) as string);
    i = end + 2;
    skipValue();
    i++; // past ',' (or the closing '}')
  }
  return keys;
}

t.test("every log line has one pid, the daemon's; a requester's is peer_pid", async (t) => {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  t.equal(init(h).code, 0);
  const d = await startDaemon(h);
  t.teardown(() => d.stop());
  t.equal(cli(h, ['unlock', '--passphrase-file', h.passFile]).code, 0);
  const sock = join(h.home, 'agent.sock');
  const r = await agentRequest(sock, 'POST', '/v1/http', {
    credential: 'ghost',
    method: 'GET',
    url: 'https://api.example.test/x',
  });
  t.equal(r.status, 404, r.text);
  t.equal(cli(h, ['lock']).code, 0);
  t.equal(await d.stop(), 0);

  const daemonPid = d.proc.pid;
  const lines = d
    .logs()
    .split('\n')
    .filter((l) => l !== '');
  t.ok(lines.length >= 4, 'start, unlock, refusal, lock and stop were logged');
  for (const line of lines) {
    const keys = topLevelKeys(line);
    t.same(
      keys.filter((k) => k === 'pid'),
      ['pid'],
      `one pid key: ${line.slice(0, 120)}`,
    );
    t.equal((JSON.parse(line) as { pid: unknown }).pid, daemonPid, "the daemon's own pid");
  }
  const parsed = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
  const refused = parsed.find((p) => p['kind'] === 'http_refused');
  t.equal(refused?.['peer_pid'], process.pid, 'the requester (this test) is named as peer_pid');
  t.equal(refused?.['code'], 'unknown_credential');
  const started = parsed.find((p) => p['kind'] === 'daemon_start');
  t.ok(started, 'daemon_start logged');
  t.notOk(started && 'peer_pid' in started, "the daemon's own pid is not presented as a peer's");
});

t.test('the key scanner sees a duplicated key and skips nested ones', async (t) => {
  t.same(topLevelKeys('{"pid":1,"a":{"pid":2,"b":[1,{"c":"}\\","}]},"pid":3}'), ['pid', 'a', 'pid']);
});
