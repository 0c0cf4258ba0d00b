// The SSH command-rule grammar (SPEC §4) against hostile commands: a prefix
// rule must never admit a second command, a quote, a redirection, a
// substitution or a new option, and no control or lookalike character may
// slip through.
import t from 'tap';
import { commandAllowed, validateCommandRule } from '../../shared/command-rule';

// Test names are printed in TAP: escape everything but printable ASCII, or
// a line separator in a name would break the stream.
function show(value: unknown): string {
  return JSON.stringify(value).replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

const APP = ['systemctl restart app-*'];
const PULL = ['git -C /srv/app pull'];
const LS = ['ls *'];
const LOGS = ['cat /srv/logs/*'];

// [rules, command, allowed, why]
const rows: [string[], string, boolean, string][] = [
  // prefix ending inside a word
  [APP, 'systemctl restart app-web', true, 'completes the word'],
  [APP, 'systemctl restart app-web extra', true, 'a further plain word'],
  [APP, 'systemctl restart app-', true, 'the rest of the word may be empty (decision)'],
  [APP, 'systemctl restart app-a-b--c', true, '"-" inside the word'],
  [APP, 'systemctl restart app--force', true, 'still one word starting with "app-", not an option'],
  [APP, 'systemctl restart app-web a=b c,d e:f g@h i+j 50% x/y.z', true, 'every allowed character'],
  [APP, 'systemctl restart app-web --force', false, 'a new option'],
  [APP, 'systemctl restart app-web -x', false, 'a short option'],
  [APP, 'systemctl restart app-web -', false, 'a word that is "-"'],
  [APP, 'systemctl restart app-web;id', false, 'second command glued on'],
  [APP, 'systemctl restart app-web; id', false, 'second command'],
  [APP, 'systemctl restart app-web x;id', false, 'second command after a further word'],
  [APP, 'systemctl restart app-web x|id', false, 'pipe in a further word'],
  [APP, 'systemctl restart app-web && id', false, 'and-list'],
  [APP, 'systemctl restart app-web || id', false, 'or-list'],
  [APP, 'systemctl restart app-web | id', false, 'pipe'],
  [APP, 'systemctl restart app-web & id', false, 'background'],
  [APP, 'systemctl restart app-web > /etc/passwd', false, 'redirection'],
  [APP, 'systemctl restart app-web >/etc/passwd', false, 'redirection glued'],
  [APP, 'systemctl restart app-web 2>&1', false, 'fd redirection'],
  [APP, 'systemctl restart app-web </etc/shadow', false, 'input redirection'],
  [APP, 'systemctl restart app-$(id)', false, 'command substitution'],
  [APP, 'systemctl restart app-`id`', false, 'backticks'],
  [APP, 'systemctl restart app-${IFS}id', false, 'variable expansion'],
  [APP, "systemctl restart app-'web'", false, 'single quotes'],
  [APP, 'systemctl restart app-"web"', false, 'double quotes'],
  [APP, 'systemctl restart app-web\\;id', false, 'backslash'],
  [APP, 'systemctl restart app-web*', false, 'glob star'],
  [APP, 'systemctl restart app-we?', false, 'glob question mark'],
  [APP, 'systemctl restart app-[a]', false, 'glob class'],
  [APP, 'systemctl restart app-{a,b}', false, 'brace expansion'],
  [APP, 'systemctl restart app-web ~root', false, 'tilde expansion'],
  [APP, 'systemctl restart app-web #x', false, 'comment'],
  [APP, 'systemctl restart app-web!', false, 'history expansion'],
  [APP, 'systemctl restart app-web\tx', false, 'tab'],
  [APP, 'systemctl restart app-web  x', false, 'double space'],
  [APP, 'systemctl restart app-web ', false, 'trailing space'],
  [APP, 'systemctl restart app-web\nid', false, 'newline'],
  [APP, 'systemctl restart app-web\rid', false, 'carriage return'],
  [APP, 'systemctl restart app-web\0', false, 'NUL'],
  [APP, 'systemctl restart app-web\x1b[2J', false, 'escape sequence'],
  [APP, 'systemctl restart app-w\u0435b', false, 'Cyrillic lookalike "е"'],
  [APP, 'systemctl restart app-web\uff1bid', false, 'fullwidth semicolon'],
  [APP, 'systemctl restart app-web\u00a0x', false, 'no-break space'],
  [APP, 'systemctl restart app-web\u2028x', false, 'line separator'],
  [APP, 'systemctl restart app-web\u202ex', false, 'bidi override'],
  [APP, 'systemctl restart app-web\u200bx', false, 'zero-width space'],
  [APP, 'systemctl restart app-web\ud800', false, 'unpaired surrogate'],
  [APP, 'systemctl  restart app-web', false, 'prefix differs (double space)'],
  [APP, 'Systemctl restart app-web', false, 'prefix differs (case)'],
  [APP, 'systemctl restart app', false, 'shorter than the prefix'],
  [APP, ' systemctl restart app-web', false, 'leading space'],
  [APP, '', false, 'empty command'],
  // exact rule: byte for byte
  [PULL, 'git -C /srv/app pull', true, 'the same string'],
  [PULL, 'git -C /srv/app pull ', false, 'trailing space'],
  [PULL, 'git -C /srv/app pull\n', false, 'trailing newline'],
  [PULL, 'git -C /srv/app pull; id', false, 'appended command'],
  [PULL, 'git -C /srv/app pull --rebase', false, 'an exact rule admits no more words'],
  [PULL, 'git -C /srv/app  pull', false, 'double space'],
  [PULL, 'GIT -C /srv/app pull', false, 'case'],
  [PULL, 'git -C /srv/app pul', false, 'shorter'],
  [PULL, 'git -C /srv/app pu\u200bll', false, 'zero-width inside'],
  // prefix ending with a space: the `*` starts a new word
  [LS, 'ls /tmp', true, 'one word'],
  [LS, 'ls /tmp /var', true, 'two words'],
  [LS, 'ls', false, 'the prefix "ls " is not there (decision)'],
  [LS, 'ls ', false, 'the word the * starts is empty'],
  [LS, 'ls -la', false, 'an option'],
  [LS, 'ls /tmp -la', false, 'an option later'],
  [LS, 'ls ~', false, 'tilde'],
  [LS, 'ls *', false, 'glob'],
  [LS, 'ls $HOME', false, 'variable'],
  [LS, 'ls ;id', false, 'the new word is a second command'],
  [LS, 'ls >x', false, 'the new word is a redirection'],
  [LS, "ls 'a'", false, 'the new word is quoted'],
  [LS, 'ls ..', false, '".." segment (decision)'],
  // path prefixes: no ".." segment in what the * covers
  [LOGS, 'cat /srv/logs/app.log', true, 'a file below'],
  [LOGS, 'cat /srv/logs/app..log', true, '".." inside a name is not a segment'],
  [LOGS, 'cat /srv/logs/a /srv/logs/b', true, 'further words are allowed by the grammar'],
  [LOGS, 'cat /srv/logs/../../etc/shadow', false, 'climbs out'],
  [LOGS, 'cat /srv/logs/a/../../../etc/shadow', false, 'climbs out later'],
  [LOGS, 'cat /srv/logs/..', false, 'the parent'],
  [LOGS, 'cat /srv/logs/a ../x', false, '".." in a further word'],
  [['cat /srv/logs/.*'], 'cat /srv/logs/./../x', false, 'the covered text adds a ".." segment'],
  [['cat ../shared/*'], 'cat ../shared/x', true, 'a ".." written in the rule itself is the author\'s choice'],
  // several rules; invalid rules never match
  [['uptime', 'df *'], 'uptime', true, 'first rule'],
  [['uptime', 'df *'], 'df /', true, 'second rule'],
  [['uptime', 'df *'], 'free', false, 'no rule'],
  [[], 'uptime', false, 'no rules'],
  [['ls * x'], 'ls * x', false, 'invalid rule (inner *) never matches'],
  [['*'], 'ls', false, 'a bare * is invalid and never matches'],
  [['ls\t*'], 'ls\tx', false, 'a rule with a tab is invalid'],
];

t.test('commandAllowed: adversarial table', async (t) => {
  t.ok(rows.length >= 40, `${rows.length} rows`);
  for (const [rules, command, allowed, why] of rows) {
    t.equal(commandAllowed(rules, command), allowed, `${show(rules)} vs ${show(command)}: ${why}`);
  }
});

t.test('commandAllowed: "." completed by the *', async (t) => {
  // `cat /srv/logs/.*` covering "." gives the word "/srv/logs/..": refused;
  // covering "x" gives "/srv/logs/.x", a hidden file: allowed.
  t.equal(commandAllowed(['cat /srv/logs/.*'], 'cat /srv/logs/..'), false);
  t.equal(commandAllowed(['cat /srv/logs/.*'], 'cat /srv/logs/.x'), true);
  t.equal(commandAllowed(['cat /srv/logs/.*'], 'cat /srv/logs/.'), true, 'the word "." itself');
});

t.test('validateCommandRule', async (t) => {
  const valid = [
    'uptime',
    'ls *',
    'systemctl restart app-*',
    'git -C /srv/app pull',
    'ls --color=*',
    'echo "hi"; id', // an exact rule may contain anything printable: the author wrote it
  ];
  for (const rule of valid) t.equal(validateCommandRule(rule), null, show(rule));

  const invalid: [unknown, RegExp][] = [
    ['', /empty/],
    ['*', /only "\*"/],
    [' ls', /starts or ends with a space/],
    ['ls ', /starts or ends with a space/],
    ['ls  -l', /two spaces/],
    ['ls\t*', /control or invisible/],
    ['ls\n', /control or invisible/],
    ['ls\0', /control or invisible/],
    ['ls\x7f', /control or invisible/],
    ['ls\u0085', /control or invisible/],
    ['ls \u202e', /control or invisible/],
    ['ls\u200b*', /control or invisible/],
    ['ls\ud800', /control or invisible/],
    ['ls\u00a0*', /whitespace other than/],
    ['ls\u3000*', /whitespace other than/],
    ['a*b', /not the last character/],
    ['ls * *', /not the last character/],
    ['ls **', /not the last character/],
    ['x'.repeat(1025), /longer than 1024/],
    [5, /must be a string/],
  ];
  for (const [rule, message] of invalid) t.match(validateCommandRule(rule), message, show(rule));
});
