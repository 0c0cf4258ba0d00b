// Showing agent-controlled text on a terminal so that what the human reads is
// what it is (SPEC §7). A card's strings come from the requesting process
// (its command line, cwd, executable path) and from its request (host, path,
// query): any of them may carry terminal escape sequences that redraw the
// screen, bidi controls that reorder what is shown, or invisible characters
// that make two different strings look the same. Every such character is
// replaced by a visible escape; the backslash itself is escaped too, so an
// escape on the screen always means the character was there, never that the
// agent typed a backslash.
import { domainToASCII, domainToUnicode } from 'node:url';

// Characters that are shown as escapes: controls (C0, DEL, C1), format
// characters (bidi, zero-width, soft hyphen, tags: category Cf), line and
// paragraph separators, spaces other than U+0020 (they pass for a plain
// space), unpaired surrogates, private-use and unassigned code points (they
// render as anything a font likes), and letters or marks that render as
// nothing (Hangul fillers, braille blank, combining grapheme joiner,
// variation selectors, and every default-ignorable code point: Khmer and
// Mongolian marks a font draws as nothing).
const HIDING =
  '\\p{Default_Ignorable_Code_Point}\\p{Cc}\\p{Cf}\\p{Zl}\\p{Zp}\\p{Zs}\\p{Cs}\\p{Co}\\p{Cn}\\u034f\\u115f\\u1160\\u3164\\uffa0\\u2800\\ufe00-\\ufe0f\\u{e0100}-\\u{e01ef}';
const SHOWN_ESCAPED = new RegExp(`[${HIDING}\\\\]`, 'gu');
// The same characters except the plain space and the backslash: what a
// string must not contain to be shown as it is.
const HIDDEN = new RegExp(`(?! )[${HIDING}]`, 'u');

const NAMED: Readonly<Record<string, string>> = {
  '\\': '\\\\',
  '\n': '\\n',
  '\r': '\\r',
  '\t': '\\t',
};

function escapeOne(ch: string): string {
  if (ch === ' ') return ch;
  const named = NAMED[ch];
  if (named) return named;
  const cp = ch.codePointAt(0) as number;
  return cp <= 0xff ? `\\x${cp.toString(16).padStart(2, '0')}` : `\\u{${cp.toString(16).toUpperCase()}}`;
}

// Longest piece of one string shown on a card; the rest is announced, not
// silently dropped, so a huge command line cannot push the card off screen.
export const MAX_SHOWN = 2000;

export function escapeText(text: string, max = MAX_SHOWN): string {
  let shown = text;
  let cut = 0;
  if (text.length > max) {
    let end = max;
    // Never split a surrogate pair into a misleading lone half.
    const last = text.charCodeAt(end - 1);
    if (last >= 0xd800 && last <= 0xdbff) end -= 1;
    shown = text.slice(0, end);
    for (const _ of text.slice(end)) cut += 1; // code points, not UTF-16 units
  }
  const escaped = shown.replace(SHOWN_ESCAPED, escapeOne);
  return cut > 0 ? `${escaped}… [${cut} more characters not shown]` : escaped;
}

// True when the text holds a character that escapeText shows as an escape
// (other than the backslash): the card flags such strings, because a
// legitimate command line or path rarely has one.
export function hasHidden(text: string): boolean {
  return HIDDEN.test(text);
}

// One command-line argument, quoted so that argument boundaries are visible
// (an argument containing a space is not two arguments).
export function quoteArg(arg: string, max = MAX_SHOWN): string {
  return `"${escapeText(arg, max).replace(/"/g, '\\"')}"`;
}

// A host name: escaped, and also in punycode when it holds non-ASCII
// characters (a look-alike of a known name shows its real spelling), or in
// Unicode when it is already punycode, so the human sees both forms.
export function showHost(host: string): string {
  const shown = escapeText(host);
  if (/[^\x00-\x7f]/.test(host)) {
    const ascii = domainToASCII(host);
    return `${shown}  (punycode: ${ascii === '' ? 'not a valid internationalised name' : escapeText(ascii)})`;
  }
  if (/(^|\.)xn--/i.test(host)) {
    const unicode = domainToUnicode(host);
    if (unicode !== '' && unicode !== host.toLowerCase())
      return `${shown}  (internationalised name; in Unicode: ${escapeText(unicode)})`;
  }
  return shown;
}

export const DELETED_MARK = '[DELETED — the file was removed or replaced after the process started]';
export const MEMFD_MARK = '[MEMFD — not a file on disk]';

// An executable path, marked when it is no longer (or never was) a file a
// human could inspect.
export function showExe(exe: string, deleted: boolean, memfd: boolean): string {
  const marks = [memfd ? MEMFD_MARK : '', deleted ? DELETED_MARK : ''].filter(Boolean);
  return [escapeText(exe), ...marks].join('  ');
}

// JSON for a terminal: the same text, with every character above that
// JSON.stringify leaves raw (C1 controls, bidi and zero-width marks,
// separators, unassigned code points) written as a \uXXXX escape, so the
// text stays valid JSON and the same value, and moves no cursor.
const RAW_IN_JSON = new RegExp(`(?! )[${HIDING}]`, 'gu');
export function terminalJson(value: unknown): string {
  return (JSON.stringify(value) ?? 'null').replace(RAW_IN_JSON, (c) => {
    let out = '';
    for (let i = 0; i < c.length; i++) out += `\\u${c.charCodeAt(i).toString(16).padStart(4, '0')}`;
    return out;
  });
}

// Columns a character takes on a terminal: two for East Asian wide and
// fullwidth characters (CJK, Hangul, fullwidth forms, most emoji), none for
// combining marks, one otherwise. What is hidden is escaped before it is
// shown, so escapes are plain ASCII here.
const WIDE =
  /[\u{1100}-\u{115f}\u{231a}\u{231b}\u{2329}\u{232a}\u{2e80}-\u{303e}\u{3041}-\u{33ff}\u{3400}-\u{4dbf}\u{4e00}-\u{9fff}\u{a000}-\u{a4cf}\u{a960}-\u{a97f}\u{ac00}-\u{d7a3}\u{f900}-\u{faff}\u{fe10}-\u{fe19}\u{fe30}-\u{fe6f}\u{ff00}-\u{ff60}\u{ffe0}-\u{ffe6}\u{1f300}-\u{1f64f}\u{1f900}-\u{1f9ff}\u{20000}-\u{3fffd}]/u;
const ZERO_WIDTH = /[\p{Mn}\p{Me}]/u;
export function charColumns(ch: string): number {
  return ZERO_WIDTH.test(ch) ? 0 : WIDE.test(ch) ? 2 : 1;
}

export function columnsOf(text: string): number {
  let n = 0;
  for (const ch of text) n += charColumns(ch);
  return n;
}
