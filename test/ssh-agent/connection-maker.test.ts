// Adversarial rows: who speaks on an ssh-agent connection (SPEC §7, §12). The
// requester is the process that made the connection; a request on it after
// that process exited or exec'd is refused as unidentified_peer, so a
// connection handed to another program never speaks for it. Rows:
// - the maker binds, forks a holder and exits; the holder's sign request is
//   refused (unidentified_peer, journaled as agent_refused), no card;
// - the maker forks a holder and exec's an innocent-looking program
//   (`sleep`) before any message is sent; the holder binds and asks for a
//   signature. The maker has exec'd: refused as unidentified_peer, and no
//   card may present `sleep` as the requester.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startAgentStack, AgentStack, runChild, Entry } from '../helpers/ssh-agent-stack';
import {
  MSG,
  blobOfLine,
  boundSession,
  frame,
  sessionBindContents,
  str,
  u32,
  userauthData,
} from '../helpers/raw-agent-client';
import { eventually } from '../helpers/postern';

let a: AgentStack;
t.before(async () => {
  a = await startAgentStack();
  // Allow once: a card that appears gets a signature out.
  a.decision = 'once';
});
t.teardown(async () => {
  await a?.close();
});

const keyBlob = (): Buffer => blobOfLine(a.sshd.keys.ed25519.publicKey);
const hostPrivate = (): string => readFileSync(a.sshd.hostKeys[0]!.privateKeyPath, 'utf8');

// A bind to the pinned server and a login for it, as OpenSSH would send them.
function bindAndSign(): { bind: Buffer; sign: Buffer } {
  const sid = randomBytes(32);
  const bind = frame(
    MSG.EXTENSION,
    str('session-bind@openssh.com'),
    sessionBindContents(boundSession(hostPrivate(), sid)),
  );
  const data = userauthData({
    sessionId: sid,
    user: a.sshd.user,
    algorithm: 'ssh-ed25519',
    keyBlob: keyBlob(),
    hostKey: blobOfLine(a.sshd.hostKey),
  });
  return { bind, sign: frame(MSG.SIGN_REQUEST, str(keyBlob()), str(data), u32(0)) };
}

// The maker connects; MODE "exit-after-bind": it sends the bind, forks a
// holder and exits; the holder sends the sign request. MODE "exec-first":
// it forks a holder and exec's sleep without sending anything (once the
// daemon has had time to accept); the holder sends both.
// The holder prints the reply types, e.g. "6 5".
const SCRIPT = `
import os, socket, sys, time
mode, path = sys.argv[1], sys.argv[2]
bind, sign = bytes.fromhex(os.environ['BIND']), bytes.fromhex(os.environ['SIGN'])
def reply(s):
    head = b''
    while len(head) < 4:
        c = s.recv(4 - len(head))
        if not c: return 'closed'
        head += c
    n = int.from_bytes(head, 'big')
    body = b''
    while len(body) < n:
        c = s.recv(n - len(body))
        if not c: return 'closed'
        body += c
    return str(body[0])
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(path)
s.set_inheritable(True)
out = []
if mode == 'exit-after-bind':
    s.sendall(bind); out.append(reply(s))
    if os.fork() == 0:
        time.sleep(1.0)  # the maker has exited by now
        s.sendall(sign); out.append(reply(s))
        print('holder', os.getpid(), ' '.join(out), flush=True)
        os._exit(0)
    print('maker', os.getpid(), flush=True)
    os._exit(0)
else:
    if os.fork() == 0:
        time.sleep(3.0)  # the maker runs sleep by now, and still does
        s.sendall(bind); out.append(reply(s))
        s.sendall(sign); out.append(reply(s))
        print('holder', os.getpid(), ' '.join(out), flush=True)
        os._exit(0)
    print('maker', os.getpid(), flush=True)
    # Time for the daemon to accept the connection: an exec before the
    # accept cannot be told from /proc (docs/threat-model.md), and a loaded
    # machine accepts late.
    time.sleep(1.5)
    os.execv('/usr/bin/sleep', ['sleep', '4'])
`;

async function run(mode: string): Promise<{ maker: number; holder: number; replies: string[]; stdout: string }> {
  const script = join(a.scratch, 'maker.py');
  writeFileSync(script, SCRIPT);
  const { bind, sign } = bindAndSign();
  const r = await runChild('/usr/bin/python3', [script, mode, a.agentSock], {
    PATH: '/usr/bin:/bin',
    BIND: bind.toString('hex'),
    SIGN: sign.toString('hex'),
  });
  a.keep(`maker ${mode}`, r.stdout + r.stderr);
  const maker = Number(/^maker (\d+)/m.exec(r.stdout)?.[1]);
  const h = /^holder (\d+) (.*)$/m.exec(r.stdout);
  return { maker, holder: Number(h?.[1]), replies: (h?.[2] ?? '').split(' '), stdout: r.stdout + r.stderr };
}

function entriesFrom(pid: number, since: number): Entry[] {
  return a.entries().filter((e) => e.seq > since && (e['pid'] === pid || e['peer_pid'] === pid));
}

const lastSeq = (): number => a.entries().at(-1)?.seq ?? 0;

t.test('the maker binds, hands the connection on and exits: the sign request is unidentified_peer', async (t) => {
  const from = lastSeq();
  const cardsBefore = a.cards.length;
  const r = await run('exit-after-bind');
  t.same(r.replies, [String(MSG.SUCCESS), String(MSG.FAILURE)], `bind accepted, sign refused (${r.stdout})`);
  t.equal(a.cards.length, cardsBefore, 'no card');
  await eventually(() => entriesFrom(r.maker, from).length > 0, 3000);
  const added = a.entries().filter((e) => e.seq > from);
  t.same(
    added.filter((e) => e.kind === 'ssh_agent_sign'),
    [],
    'no signature',
  );
  t.match(
    added.filter((e) => e.kind === 'agent_refused'),
    [{ code: 'unidentified_peer', endpoint: `ssh-agent message ${MSG.SIGN_REQUEST}` }],
    'journaled as agent_refused, unidentified_peer',
  );
});

t.test(
  'the maker execs sleep before any message: nothing speaks for it, and sleep is never the requester',
  async (t) => {
    const from = lastSeq();
    const cardsBefore = a.cards.length;
    const r = await run('exec-first');
    const cards = a.cards.slice(cardsBefore);
    t.comment(`cards: ${JSON.stringify(cards.map((c) => c.process))}`);
    const added = a.entries().filter((e) => e.seq > from);
    t.comment(
      `journal: ${JSON.stringify(added.map((e) => ({ kind: e.kind, code: e['code'], exe: e['exe'], pid: e['pid'] })))}`,
    );
    t.same(
      cards.filter((c) => c.process.pid === r.maker),
      [],
      'no card presents the exec’d maker (now /usr/bin/sleep) as the requester',
    );
    t.not(r.replies.at(-1), String(MSG.SIGN_RESPONSE), `no signature reaches the holder (${r.stdout})`);
    t.same(
      added.filter((e) => e.kind === 'ssh_agent_sign'),
      [],
      'no ssh_agent_sign',
    );
    t.match(
      added.filter((e) => e.kind === 'agent_refused'),
      [{ code: 'unidentified_peer' }],
      'refused as unidentified_peer',
    );
  },
);
