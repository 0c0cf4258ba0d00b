// Escaping of agent-controlled strings for the terminal: every class of
// character that could redraw, reorder or hide text becomes a visible escape.
import t from 'tap';
import {
  escapeText,
  hasHidden,
  quoteArg,
  showExe,
  showHost,
  DELETED_MARK,
  MEMFD_MARK,
} from '../../cli/approver/escape';

// What a terminal would act on or not show: nothing of it may survive.
const RAW_DANGER = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/u;

t.test('each character class becomes a visible escape', async (t) => {
  const table: [string, string, string][] = [
    ['NUL (C0)', '\x00', '\\x00'],
    ['ESC (C0)', '\x1b', '\\x1b'],
    ['BEL (C0)', '\x07', '\\x07'],
    ['newline', '\n', '\\n'],
    ['carriage return', '\r', '\\r'],
    ['tab', '\t', '\\t'],
    ['DEL', '\x7f', '\\x7f'],
    ['CSI (C1)', '\x9b', '\\x9b'],
    ['NEL (C1)', '\x85', '\\x85'],
    ['LRE', '\u202a', '\\u{202A}'],
    ['RLO', '\u202e', '\\u{202E}'],
    ['LRI', '\u2066', '\\u{2066}'],
    ['PDI', '\u2069', '\\u{2069}'],
    ['LRM', '\u200e', '\\u{200E}'],
    ['RLM', '\u200f', '\\u{200F}'],
    ['ALM', '\u061c', '\\u{61C}'],
    ['ZWSP', '\u200b', '\\u{200B}'],
    ['ZWNJ', '\u200c', '\\u{200C}'],
    ['ZWJ', '\u200d', '\\u{200D}'],
    ['word joiner', '\u2060', '\\u{2060}'],
    ['BOM', '\ufeff', '\\u{FEFF}'],
    ['soft hyphen (Cf)', '\u00ad', '\\xad'],
    ['tag character (Cf)', '\u{e0041}', '\\u{E0041}'],
    ['line separator', '\u2028', '\\u{2028}'],
    ['paragraph separator', '\u2029', '\\u{2029}'],
    ['no-break space', '\u00a0', '\\xa0'],
    ['ideographic space', '\u3000', '\\u{3000}'],
    ['lone surrogate', '\ud800', '\\u{D800}'],
    ['private use', '\ue000', '\\u{E000}'],
    ['Hangul filler', '\u3164', '\\u{3164}'],
    ['variation selector', '\ufe0f', '\\u{FE0F}'],
    ['backslash', '\\', '\\\\'],
  ];
  for (const [what, ch, shown] of table) {
    const out = escapeText(`a${ch}b`);
    t.equal(out, `a${shown}b`, what);
    t.notOk(RAW_DANGER.test(out), `${what}: nothing raw survives`);
  }
});

t.test('plain text, spaces and visible Unicode are shown as they are', async (t) => {
  t.equal(
    escapeText('/usr/bin/curl -s https://api.example.com/x?y=1'),
    '/usr/bin/curl -s https://api.example.com/x?y=1',
  );
  t.equal(escapeText('Grüße, 東京, emoji 😀'), 'Grüße, 東京, emoji 😀');
  t.notOk(hasHidden('a b/c\\d'), 'space and backslash are not hidden characters');
  t.ok(hasHidden('a\u200bb'));
  t.ok(hasHidden('a\x1bb'));
});

t.test('a hostile command line: ANSI clear screen, bidi override, zero-width joiner', async (t) => {
  const args = ['sh', '-c', 'echo ok\x1b[2J\x1b[H', 'safe\u202etxt.exe', 'ad\u200dmin', 'two words'];
  const shown = args.map((a) => quoteArg(a)).join(' ');
  t.equal(shown, '"sh" "-c" "echo ok\\x1b[2J\\x1b[H" "safe\\u{202E}txt.exe" "ad\\u{200D}min" "two words"');
  t.notOk(RAW_DANGER.test(shown));
  t.equal(quoteArg('say "hi"'), '"say \\"hi\\""', 'a quote inside an argument cannot close it');
  t.equal(quoteArg('a\\"b'), '"a\\\\\\"b"', 'backslash then quote stays unambiguous');
});

t.test('long strings are cut with a visible count, never mid surrogate pair', async (t) => {
  t.equal(escapeText('x'.repeat(30), 10), 'xxxxxxxxxx… [20 more characters not shown]');
  const s = 'abcdefghi😀tail';
  const out = escapeText(s, 10);
  t.equal(out, 'abcdefghi… [5 more characters not shown]', 'the emoji and "tail" are counted as 5 characters');
  t.notOk(/\\u\{D83D\}/.test(out), 'no half of the emoji shown as a lone surrogate');
});

t.test('hosts: non-ASCII also shown in punycode; punycode also in Unicode', async (t) => {
  // Cyrillic "а" (U+0430) in place of the Latin "a".
  t.equal(showHost('аpple.com'), 'аpple.com  (punycode: xn--pple-43d.com)');
  t.equal(showHost('bücher.example'), 'bücher.example  (punycode: xn--bcher-kva.example)');
  t.equal(showHost('xn--pple-43d.com'), 'xn--pple-43d.com  (internationalised name; in Unicode: аpple.com)');
  t.equal(showHost('api.github.com'), 'api.github.com');
  t.equal(showHost('127.0.0.1'), '127.0.0.1');
  t.equal(
    showHost('ex\u202eample.com'),
    'ex\\u{202E}ample.com  (punycode: not a valid internationalised name)',
    'a bidi control in a host is escaped',
  );
});

t.test('deleted and memfd executables are marked', async (t) => {
  t.equal(showExe('/usr/bin/node', false, false), '/usr/bin/node');
  t.equal(showExe('/tmp/x/node (deleted)', true, false), `/tmp/x/node (deleted)  ${DELETED_MARK}`);
  t.equal(showExe('/memfd:payload (deleted)', true, true), `/memfd:payload (deleted)  ${MEMFD_MARK}  ${DELETED_MARK}`);
  t.match(DELETED_MARK, /^\[DELETED/);
  t.match(MEMFD_MARK, /^\[MEMFD — not a file on disk\]$/);
  t.equal(showExe('/tmp/\x1b[31mred', false, false), '/tmp/\\x1b[31mred', 'an exe path is escaped too');
});
