// Marks that render as nothing (SPEC §7: zero-width characters on a card
// are shown escaped). escape.ts already escapes the combining grapheme
// joiner, the Hangul fillers, the braille blank and the variation selectors
// U+FE00–FE0F and U+E0100–E01EF; these rows hold the same rule for the other
// default-ignorable marks of the same kind: the Khmer inherent vowels
// U+17B4 and U+17B5 and the Mongolian free variation selectors U+180B–180D
// and U+180F. With one of them, "rm" and "rm<mark>" look the same on a
// card, in an argument, a cwd or a path; each must become a visible escape
// and flag the string.
import t from 'tap';
import { escapeText, hasHidden, quoteArg } from '../../cli/approver/escape';
import { renderCard } from '../../cli/approver/render';
import { testCard } from '../helpers/card';

const MARKS: [string, string][] = [
  ['KHMER VOWEL INHERENT AQ', '\u17b4'],
  ['KHMER VOWEL INHERENT AA', '\u17b5'],
  ['MONGOLIAN FREE VARIATION SELECTOR ONE', '\u180b'],
  ['MONGOLIAN FREE VARIATION SELECTOR TWO', '\u180c'],
  ['MONGOLIAN FREE VARIATION SELECTOR THREE', '\u180d'],
  ['MONGOLIAN FREE VARIATION SELECTOR FOUR', '\u180f'],
];

t.test('marks that render as nothing become visible escapes', async (t) => {
  for (const [name, mark] of MARKS) {
    const cp = mark.codePointAt(0)!.toString(16).toUpperCase();
    t.equal(escapeText(`rm${mark}`), `rm\\u{${cp}}`, name);
    t.ok(hasHidden(`rm${mark}`), `${name}: the string is flagged`);
    t.equal(quoteArg(`a${mark}b`), `"a\\u{${cp}}b"`, `${name}: in an argument`);
  }
});

t.test('on a card: the argument with the mark is escaped and the process flagged', async (t) => {
  const c = testCard({ id: 'm1', pid: 20 });
  c.process = { ...c.process, cmdline: ['rm\u180b', '-rf', '/home/dev/project\u17b4'] };
  const text = renderCard(c).join('\n');
  t.notOk(/[\u17b4\u17b5\u180b-\u180d\u180f]/u.test(text), 'no raw mark on the card');
  t.match(text, /"rm\\u\{180B\}" "-rf" "\/home\/dev\/project\\u\{17B4\}"/);
  t.match(text, /requester .* <- holds escaped characters: read carefully$/m);
});
