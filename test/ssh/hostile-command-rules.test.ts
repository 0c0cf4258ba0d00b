// SPEC §4 command rules through POST /v1/ssh, as an agent trying to get
// more than a rule admits: a second command, quotes, substitutions,
// redirections, new options, `..`, globs, braces, tilde, control and
// invisible characters, Unicode look-alikes, whitespace other than a plain
// space, very long commands. Each must be refused before anything is
// connected (the server sees no exec), with 403 denied_policy (or 400
// bad_request for what cannot be a command line), an audit_seq, and a
// message saying what to do (§6.3). The allowed forms must run.
import t from 'tap';
import { startStack } from '../helpers/stack';
import { agentRequest } from '../helpers/postern';
import { addSshCredential, SshReply } from '../helpers/ssh-credential';
import { startHostile } from '../helpers/ssh-hostile-server';

const RULES = ['systemctl restart app-*', 'cat /srv/logs/*', 'git -C /srv/app pull'];

// [command, expected code]
const REFUSED: [string, 'denied_policy' | 'bad_request' | 'either'][] = [
  ['git -C /srv/app pull; id', 'denied_policy'],
  ['git -C /srv/app pull ', 'denied_policy'],
  ['git -C /srv/app pull --rebase', 'denied_policy'],
  ['git -C /srv/app  pull', 'denied_policy'],
  ['git -C /srv/app pull\nid', 'bad_request'],
  ['git -C /srv/app pull\r', 'bad_request'],
  ['git -C /srv/app pull\u0000id', 'bad_request'],
  ['systemctl restart app-x --now', 'denied_policy'],
  ['systemctl restart app-x -- -x', 'denied_policy'],
  ['systemctl restart app-$(id)', 'denied_policy'],
  ['systemctl restart app-`id`', 'denied_policy'],
  ['systemctl restart app-x|id', 'denied_policy'],
  ['systemctl restart app-x&&id', 'denied_policy'],
  ['systemctl restart app-x&', 'denied_policy'],
  ['systemctl restart app-x>/etc/passwd', 'denied_policy'],
  ['systemctl restart app-x</etc/shadow', 'denied_policy'],
  ["systemctl restart app-x 'a b'", 'denied_policy'],
  ['systemctl restart app-x "a"', 'denied_policy'],
  ['systemctl restart app-x\\;id', 'denied_policy'],
  ['systemctl restart app-${IFS}id', 'denied_policy'],
  ['systemctl restart app-x #c', 'denied_policy'],
  ['systemctl restart app-x\tid', 'bad_request'],
  ['systemctl restart app-x\u00a0id', 'either'], // NBSP
  ['systemctl restart app-x\u3000id', 'either'], // ideographic space
  ['systemctl restart app-x\u2028id', 'bad_request'], // line separator
  ['systemctl restart app-x\u0085id', 'bad_request'], // NEL
  ['systemctl restart app-x\u200bid', 'bad_request'], // zero-width space
  ['systemctl restart app-x\u202eid', 'bad_request'], // bidi override
  ['systemctl restart app-x\uff1bid', 'denied_policy'], // fullwidth ;
  ['systemctl restart app-x\u037eid', 'denied_policy'], // Greek question mark (looks like ;)
  ['\u0455ystemctl restart app-x', 'denied_policy'], // Cyrillic s
  ['systemctl restart app-\u0445', 'denied_policy'], // Cyrillic x in the covered word
  ['cat /srv/logs/../../etc/shadow', 'denied_policy'],
  ['cat /srv/logs/..', 'denied_policy'],
  ['cat /srv/logs/x/../../../etc/shadow', 'denied_policy'],
  ['cat /srv/logs/x /srv/logs/../../etc/shadow', 'denied_policy'],
  ['cat /srv/logs/~root', 'denied_policy'],
  ['cat /srv/logs/*', 'denied_policy'],
  ['cat /srv/logs/?', 'denied_policy'],
  ['cat /srv/logs/[a]', 'denied_policy'],
  ['cat /srv/logs/{a,b}', 'denied_policy'],
  ['cat /srv/logs/!x', 'denied_policy'],
  ['cat /srv/logs', 'denied_policy'],
  ['cat /srv/logs/' + 'a'.repeat(5000), 'bad_request'],
  ['', 'bad_request'],
];
// Test names in plain ASCII (a U+2028 in a name breaks the TAP stream).
const ascii = (x: string): string =>
  JSON.stringify(x).replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
const ALLOWED = [
  'systemctl restart app-web',
  'systemctl restart app-',
  'cat /srv/logs/app.log',
  'git -C /srv/app pull',
];

t.test('command rule bypass attempts', async (t) => {
  const [srv, s] = await Promise.all([startHostile(), startStack()]);
  t.teardown(() => srv.close());
  t.teardown(() => s.close());
  await s.approver();
  const r = addSshCredential(
    s.h,
    { name: 'box', port: srv.port, user: 'deploy', auth: 'password', hostKey: srv.fingerprint, commands: RULES },
    s.h.file('box.secret', 'a-password-of-some-length\n'),
  );
  if (r.code !== 0) throw new Error(r.stderr);

  for (const [command, want] of REFUSED) {
    await t.test(`refused: ${ascii(command).slice(0, 80)}`, async (t) => {
      const x = await agentRequest(s.sock, 'POST', '/v1/ssh', { credential: 'box', command });
      const e = (x.json as { error?: { code: string; message: string; audit_seq?: unknown } }).error;
      const codes = want === 'either' ? ['denied_policy', 'bad_request'] : [want];
      t.ok(e && codes.includes(e.code), `code ${e?.code} (status ${x.status}), wanted ${codes.join(' or ')}`);
      t.equal(x.status, e?.code === 'bad_request' ? 400 : 403);
      t.type(e?.audit_seq, 'number', 'journaled');
      t.ok((e?.message.length ?? 0) > 30, `a message that says what to do: ${e?.message.slice(0, 200)}`);
      t.notOk(
        srv.events.some((ev) => ev === `session:exec:${command}`),
        'the server never saw it',
      );
    });
  }
  for (const command of ALLOWED) {
    await t.test(`allowed: ${command}`, async (t) => {
      const x = await agentRequest(s.sock, 'POST', '/v1/ssh', { credential: 'box', command });
      t.equal(x.status, 200, x.text.slice(0, 300));
      t.equal((x.json as SshReply).stdout, `ran ${command}\n`);
    });
  }
  t.same(
    srv.events.filter((e) => e.startsWith('session:exec:')).map((e) => e.slice('session:exec:'.length)),
    ALLOWED,
    'the server saw exactly the allowed commands',
  );
});
