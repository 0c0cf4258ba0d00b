// POST /v1/runs on the agent socket (SPEC §11, §6): a run bound to the
// calling process, with a fresh placeholder per credential and the `env`
// of each credential mapped to it; every refusal with its exact code; the
// run journaled at its start and at its end (its root exited — curl asked
// and left —, the lock, or every credential it held removed); the secret
// nowhere in the reply, the daemon's log or the journal.
import t from 'tap';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { startStack, auditList, Stack } from '../helpers/stack';
import { agentRequest, cli, eventually } from '../helpers/postern';
import { makeCanary, findCanary, journalText } from '../helpers/canary';
import { addSshCredential } from '../helpers/ssh-credential';
import type { RunsReply } from '../../shared/protocol';

const httpDef = (name: string, env: string) =>
  `name = "${name}"\nkind = "http"\n${env}\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n\n[[allow]]\nhost = "api.example.test"\n`;

const PLACEHOLDER = (name: string) => new RegExp(`^postern-${name.replace(/\./g, '\\.')}-[0-9a-f]{16}$`);

type Entry = Record<string, unknown>;
const runEvents = (s: Stack): Entry[] =>
  auditList<Entry>(s).filter((e) => e['kind'] === 'run_start' || e['kind'] === 'run_end');

t.test('POST /v1/runs', async (t) => {
  const s = await startStack();
  t.teardown(() => s.close());
  const secret = makeCanary('RUNSECRET');
  s.addCredential('github', httpDef('github', 'env = ["GH_TOKEN", "GITHUB_TOKEN"]'), secret);
  s.addCredential('gh-ro', httpDef('gh-ro', 'env = ["GH_TOKEN", "GH_RO"]'), secret);
  s.addCredential('plain', httpDef('plain', ''), secret);
  s.addCredential('only', httpDef('only', 'env = ["ONLY_TOKEN"]'), secret);
  const ssh = addSshCredential(
    s.h,
    { name: 'box', port: 22, user: 'deploy', auth: 'password', hostKey: `SHA256:${'A'.repeat(43)}`, commands: ['ls'] },
    s.h.file('box.secret', secret),
  );
  t.equal(ssh.code, 0, ssh.stderr);
  const show = cli(s.h, ['cred', 'show', 'github']);
  t.match(show.stdout, /GH_TOKEN.*GITHUB_TOKEN/, '`cred show` shows env');
  const replies: string[] = [];
  const runs = async (body?: unknown) => {
    const r = await agentRequest(s.sock, 'POST', '/v1/runs', body);
    replies.push(r.text);
    return r;
  };

  await t.test('named credentials: placeholders, env, conflicts, journaled', async (t) => {
    const r = await runs({ credentials: ['github', 'gh-ro'] });
    t.equal(r.status, 200, r.text);
    const reply = r.json as RunsReply;
    t.match(reply.run, /^[0-9a-f]{16}$/);
    t.same(Object.keys(reply.placeholders), ['github', 'gh-ro'], 'in the order named');
    t.match(reply.placeholders['github'], PLACEHOLDER('github'));
    t.match(reply.placeholders['gh-ro'], PLACEHOLDER('gh-ro'));
    t.same(reply.env, {
      GH_TOKEN: reply.placeholders['github'],
      GITHUB_TOKEN: reply.placeholders['github'],
      GH_RO: reply.placeholders['gh-ro'],
    });
    t.same(reply.conflicts, [{ variable: 'GH_TOKEN', credential: 'github', ignored: ['gh-ro'] }]);
    t.equal(
      reply.ssh_agent_socket,
      join(s.h.home, 'ssh-agent.sock'),
      "the daemon's ssh-agent socket, for SSH_AUTH_SOCK",
    );
    const start = runEvents(s).find((e) => e['run'] === reply.run)!;
    t.match(start, {
      kind: 'run_start',
      seq: reply.audit_seq,
      root_pid: process.pid,
      root_exe: process.execPath,
      credentials: ['github', 'gh-ro'],
    });
    t.match(start['root_instance'], new RegExp(`^${process.pid}:`));
    t.notMatch(JSON.stringify(start), /postern-github-/, 'no placeholder in the journal');

    const other = (await runs({ credentials: ['gh-ro', 'github'] })).json as RunsReply;
    t.not(other.run, reply.run);
    t.not(other.placeholders['github'], reply.placeholders['github'], 'placeholders differ per run');
    t.equal(other.env['GH_TOKEN'], other.placeholders['gh-ro'], 'the first named wins');
    t.same(other.conflicts, [{ variable: 'GH_TOKEN', credential: 'gh-ro', ignored: ['github'] }]);
  });

  await t.test('no body, {} or an empty list: every HTTP credential', async (t) => {
    for (const body of [undefined, {}, { credentials: [] }]) {
      const r = await runs(body);
      t.equal(r.status, 200, r.text);
      const reply = r.json as RunsReply;
      t.same(Object.keys(reply.placeholders), ['gh-ro', 'github', 'only', 'plain'], 'never the ssh one');
      t.equal(reply.env['GH_TOKEN'], reply.placeholders['gh-ro']);
      t.equal(reply.env['ONLY_TOKEN'], reply.placeholders['only']);
    }
  });

  await t.test('every refusal with its exact code and the field named', async (t) => {
    const cases: [unknown, number, string, RegExp][] = [
      [
        { credentials: ['githb'] },
        404,
        'unknown_credential',
        /no credential named "githb" \(did you mean "github"\?\)/,
      ],
      [{ credentials: ['github', 'nosuch'] }, 404, 'unknown_credential', /"nosuch"/],
      [{ credentials: ['box'] }, 400, 'bad_request', /"box" is an ssh credential; placeholders are for HTTP/],
      [{ credentials: 'github' }, 400, 'bad_request', /^credentials: must be a list of credential names/],
      [{ credentials: [1] }, 400, 'bad_request', /^credentials\[0\]: must be a string/],
      [{ credentials: ['GitHub'] }, 400, 'bad_request', /^credentials\[0\]: "GitHub" is not a credential name/],
      [{ credentials: ['github', 'github'] }, 400, 'bad_request', /^credentials\[1\]: "github" is named twice/],
      [{ credentials: null }, 400, 'bad_request', /^credentials: must be a list/],
      [
        { credential: ['github'] },
        400,
        'bad_request',
        /"credential": unknown field; remove it \(the fields are credentials\)/,
      ],
      [{ credentials: ['github'], env: {} }, 400, 'bad_request', /"env": unknown field/],
      [['github'], 400, 'bad_request', /must be a JSON object/],
      ['github', 400, 'bad_request', /must be a JSON object/],
      [{ credentials: Array.from({ length: 257 }, (_, i) => `c${i}`) }, 400, 'bad_request', /at most 256/],
    ];
    for (const [body, status, code, message] of cases) {
      const r = await runs(body);
      const err = (r.json as { error: { code: string; message: string; audit_seq?: number } }).error;
      t.equal(r.status, status, `${JSON.stringify(body).slice(0, 50)}: ${r.text.slice(0, 200)}`);
      t.equal(err.code, code);
      t.match(err.message, message);
      t.type(err.audit_seq, 'number', 'journaled');
    }
    const raw = await new Promise<string>((resolve) => {
      const r = spawnSync(
        'curl',
        ['-s', '--unix-socket', s.sock, '-X', 'POST', '--data', '{nope', 'http://postern/v1/runs'],
        {
          encoding: 'utf8',
        },
      );
      resolve(r.stdout);
    });
    t.match(JSON.parse(raw), { error: { code: 'bad_request', message: /not valid UTF-8 JSON/ } });
    const refused = auditList<Entry>(s).filter(
      (e) => e['kind'] === 'agent_refused' && e['endpoint'] === 'POST /v1/runs',
    );
    t.ok(refused.length >= cases.length + 1, 'each refusal is journaled');
  });

  await t.test('a run of curl ends when curl exits', async (t) => {
    const r = spawnSync('curl', ['-s', '--unix-socket', s.sock, '-X', 'POST', 'http://postern/v1/runs'], {
      encoding: 'utf8',
    });
    replies.push(r.stdout);
    const reply = JSON.parse(r.stdout) as RunsReply;
    t.match(reply.placeholders['github'], PLACEHOLDER('github'));
    const start = runEvents(s).find((e) => e['run'] === reply.run && e['kind'] === 'run_start')!;
    t.match(start['root_exe'], /curl$/);
    t.ok(
      await eventually(
        () =>
          runEvents(s).some((e) => e['run'] === reply.run && e['kind'] === 'run_end' && e['reason'] === 'root_exited'),
        8000,
      ),
      'run_end root_exited, with no request after it',
    );
  });

  await t.test('a run whose every credential is removed ends as revoked', async (t) => {
    const reply = (await runs({ credentials: ['only'] })).json as RunsReply;
    const both = (await runs({ credentials: ['only', 'plain'] })).json as RunsReply;
    const rm = cli(s.h, ['cred', 'rm', 'only', '--passphrase-file', s.h.passFile]);
    t.equal(rm.code, 0, rm.stderr);
    const ends = runEvents(s).filter((e) => e['kind'] === 'run_end');
    t.match(
      ends.find((e) => e['run'] === reply.run),
      { reason: 'revoked' },
    );
    t.notOk(
      ends.some((e) => e['run'] === both.run),
      'a run still holding another credential goes on',
    );
    const again = await runs({ credentials: ['only'] });
    t.equal((again.json as { error: { code: string } }).error.code, 'unknown_credential');
  });

  await t.test('lock ends every run; a locked daemon makes none', async (t) => {
    const before = runEvents(s);
    const live = before
      .filter((e) => e['kind'] === 'run_start')
      .map((e) => e['run'])
      .filter((id) => !before.some((e) => e['kind'] === 'run_end' && e['run'] === id));
    t.ok(live.length >= 5, `${live.length} live runs`);
    t.equal(cli(s.h, ['lock']).code, 0);
    const after = runEvents(s).filter((e) => e['kind'] === 'run_end' && e['reason'] === 'locked');
    t.same(after.map((e) => e['run']).sort(), [...live].sort(), 'each live run ended as locked');
    const r = await runs({ credentials: ['github'] });
    t.equal(r.status, 423);
    t.equal((r.json as { error: { code: string } }).error.code, 'vault_locked');
  });

  await t.test('the secret is in no reply, log line or journal entry', async (t) => {
    t.ok(replies.length > 10);
    t.same(findCanary(replies.join('\n'), secret), [], 'replies');
    t.same(findCanary(s.d.logs(), secret), [], 'daemon log');
    t.same(findCanary(await journalText(s.h), secret), [], 'journal');
  });
});
