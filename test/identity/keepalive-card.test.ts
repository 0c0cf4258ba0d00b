// SPEC §7: the card shows the process chain with exe, cwd; "executables
// that are deleted ... marked as such". The facts that change while a
// process runs (parent, working directory, a deleted executable) are read
// again when a card is shown (pipeline/approve.ts). test/identity/deleted-later covers a NEW
// connection per request. Here the agent keeps ONE connection alive (as
// every HTTP client library does by default) and between two requests
// deletes its own executable and changes directory. The second card must
// show the truth at the time it is asked: the exe marked deleted and the
// new working directory.
import t from 'tap';
import { spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startStack, Card } from '../helpers/stack';

const PY = String.raw`import http.client, json, os, socket, sys
sock_path, url, newdir = sys.argv[1], sys.argv[2], sys.argv[3]
class C(http.client.HTTPConnection):
    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(sock_path)
        self.sock = s
c = C('postern', timeout=60)
def ask():
    body = json.dumps({'credential': 'api', 'method': 'GET', 'url': url}).encode()
    c.request('POST', '/v1/http', body=body, headers={'content-type': 'application/json'})
    r = c.getresponse()
    return {'status': r.status, 'text': r.read().decode('utf-8', 'replace')}
first = ask()
first_sock = c.sock.fileno() if c.sock else None
os.unlink(os.path.realpath('/proc/self/exe'))
os.chdir(newdir)
second = ask()
print(json.dumps({'first': first, 'second': second, 'same_connection': c.sock is not None and c.sock.fileno() == first_sock}))
`;

interface CardProcess {
  key: string;
  pid: number;
  exe: string;
  exe_deleted: boolean;
  cwd: string;
}

t.test('a kept-alive connection: the second card shows the deleted exe and the new cwd', async (t) => {
  const s = await startStack();
  t.teardown(() => s.close());
  s.addCredential(
    'api',
    `name = "api"\nkind = "http"\napprove = "each-use"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${s.up.port}]\nmethods = ["GET"]\npaths = ["/v1/*"]\n`,
    'keepalive-secret-0123456789',
  );
  const cards: Card[] = [];
  await s.approver((card) => {
    cards.push(card);
    return { decision: 'deny' };
  });
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'pt-probe-ka-')));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const script = join(dir, 'agent.py');
  writeFileSync(script, PY);
  const copy = join(dir, 'python-copy');
  copyFileSync(realpathSync('/usr/bin/python3'), copy);
  const first = join(dir, 'first-dir');
  const second = join(dir, 'second-dir');
  mkdirSync(first);
  mkdirSync(second);
  const p = spawn(copy, [script, s.sock, s.url('api.example.test', '/v1/x'), second], {
    cwd: first,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  p.stdout.on('data', (d: Buffer) => (out += d.toString()));
  await new Promise((r) => p.on('close', r));
  const res = JSON.parse(out) as {
    first: { status: number };
    second: { status: number; text: string };
    same_connection: boolean;
  };
  t.equal(res.first.status, 403, 'first request denied by the human');
  t.equal(res.second.status, 403, `second request reached a human too: ${res.second.text}`);
  t.ok(res.same_connection, 'both requests went over one kept-alive connection');
  t.equal(cards.length, 2, 'two cards');
  const a = cards[0]!.process as unknown as CardProcess;
  const b = cards[1]?.process as unknown as CardProcess | undefined;
  t.same(
    { exe: a.exe, deleted: a.exe_deleted, cwd: a.cwd },
    { exe: copy, deleted: false, cwd: first },
    'first card: as started',
  );
  t.equal(b?.exe_deleted, true, `second card marks the exe deleted (card exe: ${b?.exe})`);
  t.equal(b?.cwd, second, `second card shows the cwd at the time of the request (card cwd: ${b?.cwd})`);
});
