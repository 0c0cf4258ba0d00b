// POST /v1/ssh refusals that come before any connection (SPEC §4 command
// rules, §6.2 address rules, §6.3 errors), through the real daemon with
// Debian's OpenSSH sshd listening: each refused request gets its exact
// status and code, is journaled (ssh_refused, audit_seq in the error), opens
// no connection (sshd's log does not change) and raises no approval card;
// requests the rules allow do reach sshd, one card each.
import t from 'tap';
import type { Test } from 'tap';
import { startSshd } from '../helpers/sshd';
import { startStack, Stack, Card, auditList } from '../helpers/stack';
import { agentRequest } from '../helpers/postern';
import { SshCredSpec, SshReply, addSshCredential } from '../helpers/ssh-credential';

interface ErrorBody {
  error: { code: string; message: string; audit_seq?: unknown };
}

type Entry = Record<string, unknown> & { seq: number; kind?: string };

// Every allowed request asks, so a refusal that raised no card is seen.
type CredSpec = SshCredSpec & { host: string; allow?: string[] };

function addSsh(s: Stack, c: CredSpec, keyFile: string): void {
  const r = addSshCredential(s.h, { ...c, approve: 'each-use', allow: c.allow ?? [] }, keyFile);
  if (r.code !== 0) throw new Error(`cred add ${c.name}: ${r.stderr}`);
}

const auditEntries = (s: Stack): Entry[] => auditList<Entry>(s);

interface Row {
  what: string;
  body: Record<string, unknown>;
  status: number;
  code: string;
  message?: RegExp;
}

const RULES = ['echo *', 'cat /tmp/dir/*', 'printf ok', 'id -un'];

t.test('refused before connecting', async (t) => {
  const [sshd, s] = await Promise.all([
    startSshd(),
    startStack({
      records: {
        'box.example.test': { A: ['127.0.0.1'] },
        'inner.example.test': { A: ['10.0.0.5'] },
        // A checked address first: a pick of the first address alone would
        // go to loopback, never to the private one.
        'mixed.example.test': { A: ['127.0.0.1', '10.0.0.5'] },
        'other.example.test': { A: ['127.0.0.2'] },
      },
    }),
  ]);
  t.teardown(() => sshd.close());
  t.teardown(() => s.close());
  const cards: Card[] = [];
  await s.approver((card) => {
    cards.push(card);
    return { decision: 'once' };
  });
  const base = { port: sshd.port, user: sshd.user, hostKey: sshd.hostKeyFingerprint };
  const key = sshd.keys.ed25519.path;
  addSsh(s, { ...base, name: 'pol', host: 'box.example.test', commands: RULES, allow: ['127.0.0.1/32'] }, key);
  addSsh(s, { ...base, name: 'inner', host: 'inner.example.test', commands: RULES, allow: ['127.0.0.1/32'] }, key);
  addSsh(s, { ...base, name: 'mixed', host: 'mixed.example.test', commands: RULES, allow: ['127.0.0.1/32'] }, key);
  addSsh(s, { ...base, name: 'other', host: 'other.example.test', commands: RULES, allow: ['127.0.0.1/32'] }, key);
  addSsh(s, { ...base, name: 'noallow', host: '127.0.0.1', commands: RULES }, key);
  addSsh(
    s,
    { ...base, name: 'withstdin', host: '127.0.0.1', commands: ['cat'], stdin: true, allow: ['127.0.0.1/32'] },
    key,
  );
  s.addCredential(
    'web',
    'name = "web"\nkind = "http"\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\n',
    'web-token-value',
  );

  const post = (body: Record<string, unknown>): Promise<{ status: number; json: unknown; text: string }> =>
    agentRequest(s.sock, 'POST', '/v1/ssh', body);

  // Allowed requests reach sshd: one card and one session each.
  const allowed = async (t: Test, body: Record<string, unknown>, stdout: string): Promise<void> => {
    const cardsBefore = cards.length;
    const logBefore = sshd.logs().length;
    const r = await post(body);
    t.equal(r.status, 200, `${String(body['command'])}: ${r.text}`);
    t.equal((r.json as SshReply).stdout, stdout);
    t.equal(cards.length, cardsBefore + 1, 'one card');
    t.match(
      sshd.logs().slice(logBefore),
      `Starting session: command for ${sshd.user} from 127.0.0.1`,
      'the command reached sshd',
    );
  };

  // sshd logs a session's close after postern has replied (the channel
  // closes behind the reply); wait for the closes of the requests before,
  // so a late line of theirs is not taken for this one's.
  const settledLogs = async (): Promise<string> => {
    for (let i = 0; i < 250; i++) {
      const l = sshd.logs();
      const open = (l.match(/Starting session:/g) ?? []).length - (l.match(/Close session:/g) ?? []).length;
      if (open <= 0) return l;
      await new Promise((r) => setTimeout(r, 20));
    }
    return sshd.logs();
  };

  const runRows = async (t: Test, rows: Row[]): Promise<void> => {
    for (const row of rows) {
      await t.test(row.what, async (t) => {
        const logBefore = await settledLogs();
        const connections = sshd.connections();
        const cardsBefore = cards.length;
        const r = await post(row.body);
        t.equal(r.status, row.status, r.text);
        const err = (r.json as ErrorBody | null)?.error;
        t.equal(err?.code, row.code);
        if (row.message) t.match(err?.message, row.message);
        t.type(err?.audit_seq, 'number', 'journaled');
        t.equal(sshd.connections(), connections, 'no connection to sshd');
        t.equal(sshd.logs(), logBefore, "sshd's log did not change");
        t.equal(cards.length, cardsBefore, 'no approval card');
      });
    }
  };

  await t.test('the rules admit plain words', async (t) => {
    await allowed(t, { credential: 'pol', command: 'echo hi' }, 'hi\n');
    await allowed(
      t,
      { credential: 'pol', command: 'echo a=b,c:d@e%f+g x_y.z/w-1 a..b' },
      'a=b,c:d@e%f+g x_y.z/w-1 a..b\n',
    );
    await allowed(t, { credential: 'pol', command: 'printf ok' }, 'ok');
  });

  const denied = (command: string, what = command): Row => ({
    what: `denied: ${JSON.stringify(what)}`,
    body: { credential: 'pol', command },
    status: 403,
    code: 'denied_policy',
  });
  const malformed = (command: string, what: string): Row => ({
    what: `bad_request: ${what}`,
    body: { credential: 'pol', command },
    status: 400,
    code: 'bad_request',
  });

  await t.test('commands outside the rules', async (t) => {
    await runRows(t, [
      { ...denied('echo hi; id'), message: /does not allow this command.*"echo \*"/ },
      denied('echo hi;id'),
      denied('echo hi && id'),
      denied('echo hi || id'),
      denied('echo hi & id'),
      denied('echo hi | id'),
      denied('echo $(id)'),
      denied('echo `id`'),
      denied('echo $HOME'),
      denied('echo ${HOME}'),
      denied('echo "quoted"'),
      denied("echo 'x'"),
      denied('echo a\\b'),
      denied('echo -e x', 'a new option after the *'),
      denied('echo hi -n', 'an option as a later word'),
      denied('echo --help'),
      denied('echo hi > /tmp/x'),
      denied('echo hi >/tmp/x'),
      denied('echo hi < /etc/passwd'),
      denied('echo hi 2>&1'),
      denied('echo a  b', 'two spaces'),
      denied('echo hi ', 'a trailing space'),
      denied(' echo hi', 'a leading space'),
      denied('echo', 'the bare command: the * needs a word'),
      denied('echo ', 'the bare command and a space'),
      denied('echo *', 'a glob'),
      denied('echo h?'),
      denied('echo [a]'),
      denied('echo ~root'),
      denied('echo hi#x'),
      denied('echo hi # comment'),
      denied('echo {a,b}'),
      denied('echo a!b'),
      denied('cat /tmp/dir/../../etc/shadow', 'a .. segment'),
      denied('cat /tmp/dir/..', 'a .. segment at the end'),
      denied('cat /tmp/dir/x/../../../etc/passwd', 'a .. segment further down'),
      denied('cat /tmp/dir/ok ../etc/passwd', 'a .. segment in a later word'),
      denied('cat /tmp/dir/ok /tmp/dir/../x', 'a .. segment in a later path'),
      denied('cat /tmp/dirx/y', 'a sibling directory'),
      denied('printf ok ', 'an exact rule with a trailing space'),
      denied('printf  ok', 'an exact rule with two spaces'),
      denied('printf ok; id', 'an exact rule and more'),
      denied('Printf ok', 'an exact rule in another case'),
      denied('id -un -r', 'an exact rule and an option'),
      denied('id', 'an exact rule without its option'),
      denied('echo hi\uff1bid', 'a fullwidth semicolon'),
      denied('\u0435cho hi', 'a Cyrillic e in the command name'),
      denied('echo h\u0456', 'a Cyrillic i in a covered word'),
      denied('echo\u00a0hi', 'a no-break space'),
      denied('echo hi\u2003x', 'an em space'),
      denied('echo \uff04(id)', 'a fullwidth dollar'),
      denied('echo \uff48\uff49', 'fullwidth letters'),
      denied('printf o\u043a', 'a lookalike in an exact rule'),
      malformed('echo hi\nid', 'a newline'),
      malformed('echo hi\rid', 'a carriage return'),
      malformed('echo hi\tid', 'a tab'),
      malformed('echo hi\u0000', 'a NUL'),
      malformed('echo h\u200bi', 'a zero-width space'),
      malformed('echo \u202eih', 'a bidi override'),
      malformed('echo hi\u2028', 'a line separator'),
      malformed('', 'an empty command'),
      malformed(`echo ${'a'.repeat(4096)}`, 'over 4096 characters'),
    ]);
  });

  await t.test('stdin', async (t) => {
    await runRows(t, [
      {
        what: 'stdin to a credential without stdin',
        body: { credential: 'pol', command: 'echo hi', stdin: 'x' },
        status: 403,
        code: 'denied_policy',
        message: /allows no stdin/,
      },
      {
        what: 'stdin_base64 to a credential without stdin',
        body: { credential: 'pol', command: 'echo hi', stdin_base64: 'eA==' },
        status: 403,
        code: 'denied_policy',
      },
      {
        what: 'stdin and stdin_base64',
        body: { credential: 'withstdin', command: 'cat', stdin: 'x', stdin_base64: 'eA==' },
        status: 400,
        code: 'bad_request',
      },
      {
        what: 'stdin_base64 that is not base64',
        body: { credential: 'withstdin', command: 'cat', stdin_base64: 'not base64!' },
        status: 400,
        code: 'bad_request',
      },
      {
        what: 'stdin not a string',
        body: { credential: 'withstdin', command: 'cat', stdin: 5 },
        status: 400,
        code: 'bad_request',
      },
    ]);
    // An empty stdin is no stdin.
    await allowed(t, { credential: 'pol', command: 'echo hi', stdin: '' }, 'hi\n');
    await allowed(t, { credential: 'pol', command: 'echo hi', stdin_base64: '' }, 'hi\n');
    await allowed(t, { credential: 'withstdin', command: 'cat', stdin: 'given\n' }, 'given\n');
  });

  await t.test('malformed requests', async (t) => {
    await runRows(t, [
      {
        what: 'an unknown field (env)',
        body: { credential: 'pol', command: 'echo hi', env: { A: 'b' } },
        status: 400,
        code: 'bad_request',
      },
      {
        what: 'an unknown field (pty)',
        body: { credential: 'pol', command: 'echo hi', pty: true },
        status: 400,
        code: 'bad_request',
      },
      { what: 'no command', body: { credential: 'pol' }, status: 400, code: 'bad_request' },
      {
        what: 'a command that is not a string',
        body: { credential: 'pol', command: ['echo', 'hi'] },
        status: 400,
        code: 'bad_request',
      },
      {
        what: 'timeout_ms 0',
        body: { credential: 'pol', command: 'echo hi', timeout_ms: 0 },
        status: 400,
        code: 'bad_request',
      },
      {
        what: 'timeout_ms over max_timeout',
        body: { credential: 'pol', command: 'echo hi', timeout_ms: 11 * 60 * 1000 },
        status: 400,
        code: 'bad_request',
      },
      {
        what: 'an unknown credential',
        body: { credential: 'nope', command: 'echo hi' },
        status: 404,
        code: 'unknown_credential',
      },
      {
        what: 'an HTTP credential',
        body: { credential: 'web', command: 'echo hi' },
        status: 400,
        code: 'bad_request',
        message: /POST \/v1\/http/,
      },
    ]);
    // And the other way round: an SSH credential on /v1/http.
    const r = await agentRequest(s.sock, 'POST', '/v1/http', {
      credential: 'pol',
      method: 'GET',
      url: 'https://api.example.test/',
    });
    t.equal(r.status, 400);
    t.equal((r.json as ErrorBody).error.code, 'bad_request');
  });

  await t.test('address rules', async (t) => {
    await runRows(t, [
      {
        what: 'a name resolving to a private address',
        body: { credential: 'inner', command: 'echo hi' },
        status: 403,
        code: 'denied_address',
        message: /10\.0\.0\.5.*private/,
      },
      {
        what: 'a name with a checked and a private address',
        body: { credential: 'mixed', command: 'echo hi' },
        status: 403,
        code: 'denied_address',
        message: /10\.0\.0\.5/,
      },
      {
        what: 'loopback outside allow_addresses',
        body: { credential: 'other', command: 'echo hi' },
        status: 403,
        code: 'denied_address',
        message: /127\.0\.0\.2.*loopback/,
      },
      {
        what: 'loopback without allow_addresses',
        body: { credential: 'noallow', command: 'echo hi' },
        status: 403,
        code: 'denied_address',
        message: /127\.0\.0\.1.*loopback/,
      },
      // Policy comes first: a refused command is refused as such even where
      // the address would be refused too.
      {
        what: 'a refused command to a refused address',
        body: { credential: 'inner', command: 'echo $(id)' },
        status: 403,
        code: 'denied_policy',
      },
    ]);
  });

  await t.test('refusals are journaled as ssh_refused', async (t) => {
    const rs = await Promise.all([
      post({ credential: 'pol', command: 'echo hi; id' }),
      post({ credential: 'inner', command: 'echo hi' }),
      post({ credential: 'pol', command: 'echo hi\nid' }),
    ]);
    const seqs = rs.map((r) => (r.json as ErrorBody).error.audit_seq as number);
    const entries = auditEntries(s);
    const bySeq = (seq: number): Entry | undefined => entries.find((e) => e.seq === seq);
    t.match(bySeq(seqs[0]!), {
      kind: 'ssh_refused',
      code: 'denied_policy',
      credential: 'pol',
      command: 'echo hi; id',
      host: 'box.example.test',
      user: sshd.user,
      host_key: sshd.hostKeyFingerprint,
    });
    t.match(bySeq(seqs[1]!), {
      kind: 'ssh_refused',
      code: 'denied_address',
      credential: 'inner',
      host: 'inner.example.test',
      command: 'echo hi',
    });
    t.match(bySeq(seqs[2]!), { kind: 'ssh_refused', code: 'bad_request' });
    t.notOk(
      entries.some(
        (e) =>
          e.kind === 'ssh_intent' &&
          (e['credential'] === 'inner' ||
            e['credential'] === 'mixed' ||
            e['credential'] === 'other' ||
            e['credential'] === 'noallow'),
      ),
      'no intent for a refused address',
    );
    const refusedCommands = new Set(entries.filter((e) => e.kind === 'ssh_refused').map((e) => e['command']));
    t.ok(
      refusedCommands.has('echo a  b') && refusedCommands.has('cat /tmp/dir/../../etc/shadow'),
      'each refused command is in the journal',
    );
    t.notOk(
      entries.some((e) => e.kind === 'ssh_intent' && e['command'] === 'echo hi; id'),
      'no intent for a refused command',
    );
  });
});
