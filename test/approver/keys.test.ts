// Keys and --auto choices: which decisions a card offers, that only a
// single key press decides (never an escape sequence or a paste), and what
// --auto approve picks for each --root-depth.
import t from 'tap';
import { autoChoice, choicesFor, readKey } from '../../cli/approver/keys';
import type { Card, CardProcess } from '../../cli/approver/card';

function proc(pid: number): CardProcess {
  return { key: `k${pid}`, pid, uid: 0, exe: '/bin/x', exe_deleted: false, exe_memfd: false, cwd: '/', cmdline: ['x'] };
}

function card(approve: 'session' | 'each-use', ancestors = 2): Card {
  return {
    id: 'c1',
    credential: 'api',
    approve,
    created_at: '',
    expires_at: '',
    process: proc(50),
    ancestors: Array.from({ length: ancestors }, (_, i) => proc(40 - i)),
    action: { kind: 'http' },
  };
}

t.test('choices: deny, once, a session at the requester or an existing ancestor', async (t) => {
  t.same(
    choicesFor(card('session')).map((c) => [c.key, c.args]),
    [
      ['d', { id: 'c1', decision: 'deny' }],
      ['o', { id: 'c1', decision: 'once' }],
      ['s', { id: 'c1', decision: 'session', root_key: 'k50' }],
      ['1', { id: 'c1', decision: 'session', root_key: 'k40' }],
      ['2', { id: 'c1', decision: 'session', root_key: 'k39' }],
    ],
  );
  t.same(
    choicesFor(card('each-use')).map((c) => c.key),
    ['d', 'o'],
    'each-use: no session',
  );
  t.same(
    choicesFor(card('session', 12)).map((c) => c.key),
    ['d', 'o', 's', '1', '2', '3', '4', '5', '6', '7', '8', '9'],
    'digits stop at 9',
  );
});

t.test('readKey: one byte is a key; sequences and pastes are not', async (t) => {
  const c = card('session');
  const key = (b: Buffer): string => {
    const k = readKey(b, c);
    return k.kind === 'choice' ? k.choice.key : k.kind;
  };
  t.equal(key(Buffer.from('d')), 'd');
  t.equal(key(Buffer.from('o')), 'o');
  t.equal(key(Buffer.from('s')), 's');
  t.equal(key(Buffer.from('2')), '2');
  t.equal(key(Buffer.from('3')), 'ignored', 'no ancestor 3');
  t.equal(key(Buffer.from('q')), 'quit');
  t.equal(key(Buffer.from([0x03])), 'quit', 'Ctrl-C');
  t.equal(key(Buffer.from('\x1b[1~')), 'ignored', 'Home (ESC [ 1 ~) is not the key 1');
  t.equal(key(Buffer.from('\x1b[A')), 'ignored', 'an arrow');
  t.equal(key(Buffer.from('\x1bOs')), 'ignored', 'an SS3 sequence ending in s');
  t.equal(key(Buffer.from('ds')), 'ignored', 'pasted text');
  t.equal(key(Buffer.from('S')), 'ignored', 'keys are exact');
  t.equal(key(Buffer.from('s')), 's');
  t.equal(readKey(Buffer.from('s'), null).kind, 'ignored', 'no card: nothing to decide');
  t.equal(readKey(Buffer.from('1'), card('each-use')).kind, 'ignored', 'each-use: a digit does nothing');
});

t.test('autoChoice', async (t) => {
  const args = (c: Card, mode: 'approve' | 'deny', depth?: number): unknown => autoChoice(c, mode, depth).args;
  t.same(args(card('session'), 'deny'), { id: 'c1', decision: 'deny' });
  t.same(
    args(card('session'), 'approve'),
    { id: 'c1', decision: 'session', root_key: 'k50' },
    'default: the requester',
  );
  t.same(args(card('session'), 'approve', 1), { id: 'c1', decision: 'session', root_key: 'k40' });
  t.same(args(card('session'), 'approve', 2), { id: 'c1', decision: 'session', root_key: 'k39' });
  t.same(
    args(card('session'), 'approve', 7),
    { id: 'c1', decision: 'session', root_key: 'k39' },
    'beyond the chain: the highest ancestor',
  );
  t.same(
    args(card('session', 0), 'approve', 3),
    { id: 'c1', decision: 'session', root_key: 'k50' },
    'no ancestors: the requester',
  );
  t.same(
    args(card('session', 12), 'approve', 11),
    { id: 'c1', decision: 'session', root_key: 'k30' },
    'depth beyond the digit keys',
  );
  t.same(args(card('each-use'), 'approve', 1), { id: 'c1', decision: 'once' }, 'each-use: once');
  const keyless = card('session');
  keyless.process.key = '';
  t.same(args(keyless, 'approve'), { id: 'c1', decision: 'once' }, 'no process key: once');
});
