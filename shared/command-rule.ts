// SSH command rules (SPEC §4). A rule is either exact — the command must be
// the same string, byte for byte — or ends in `*`: the command must start
// with everything before the `*`, and what the `*` covers is the rest of the
// word it ends plus zero or more further words, each made only of
// `A-Z a-z 0-9 . _ / : @ = + , % -`, not starting with `-`, separated by
// single spaces. A prefix rule therefore never admits a second command, a
// quote, a redirection, a variable, a glob or a new option.
//
// Decisions the SPEC leaves open (docs must say the same):
// - `app-*` matches `app-` itself: the rest of the word may be empty.
// - `ls *` (the `*` starts a new word) does not match `ls` nor `ls `: the
//   command must start with the literal prefix `ls `, and the word the `*`
//   starts must not be empty. Add the exact rule `ls` to allow it bare.
// - A covered word may not contain a `..` path segment (`..`, `../x`,
//   `x/..`, `x/../y`), so `cat /srv/logs/*` cannot reach `/srv/logs/../..`.
//   `a..b` (not a segment) is allowed.
// - A `*` anywhere but at the end is an error, so an exact rule cannot end
//   in a literal `*` and no rule contains one.

import { hasInvisible } from './credential/text';

// What a `*` may cover: words of these characters (ASCII only, so no
// lookalikes), and the rest of the word it ends, which may be empty.
const WORD_CHARS = 'A-Za-z0-9._/:@=+,%\\-';
const COVERED_WORD = new RegExp(`^[${WORD_CHARS}]+$`);
const COVERED_REST = new RegExp(`^[${WORD_CHARS}]*$`);
const DOT_DOT_SEGMENT = /(?:^|\/)\.\.(?:\/|$)/;

// Any whitespace other than a plain space (tab, NBSP, ideographic space...).
const OTHER_SPACE = /(?! )\s/u;

export const MAX_COMMAND_RULE_LENGTH = 1024;

// The problem with a rule, or null when it is valid. The message names the
// fault; callers prefix it with the rule's path.
export function validateCommandRule(rule: unknown): string | null {
  if (typeof rule !== 'string') return 'must be a string';
  if (rule.length === 0) return 'is empty; write the command, e.g. "systemctl restart app-*"';
  if (rule.length > MAX_COMMAND_RULE_LENGTH) return `is longer than ${MAX_COMMAND_RULE_LENGTH} characters`;
  if (hasInvisible(rule))
    return 'contains a control or invisible character (newline, tab, NUL, bidi, zero-width or a broken surrogate)';
  if (OTHER_SPACE.test(rule)) return 'contains whitespace other than single plain spaces';
  if (rule.startsWith(' ') || rule.endsWith(' ')) return 'starts or ends with a space; remove it';
  if (rule.includes('  ')) return 'contains two spaces in a row; words are separated by single spaces';
  const star = rule.indexOf('*');
  if (star !== -1 && star !== rule.length - 1) {
    return 'has a "*" that is not the last character; "*" may only end a rule';
  }
  if (rule === '*') return 'is only "*"; name the command before it, e.g. "git -C /srv/app *"';
  return null;
}

export function isPrefixRule(rule: string): boolean {
  return rule.endsWith('*');
}

// Commands that can never match any rule, whatever the rules say.
function isUnmatchableCommand(command: string): boolean {
  return command.length === 0 || hasInvisible(command);
}

function prefixRuleMatches(rule: string, command: string): boolean {
  const prefix = rule.slice(0, -1);
  if (!command.startsWith(prefix)) return false;
  const covered = command.slice(prefix.length);
  const words = covered.split(' ');
  // The first piece completes the word the `*` ends; it may be empty only
  // when the prefix already started that word (`app-*` matches `app-`).
  const first = words[0] as string;
  const startsNewWord = prefix.endsWith(' ');
  if (startsNewWord ? !COVERED_WORD.test(first) || first.startsWith('-') : !COVERED_REST.test(first)) return false;
  // The path segment the covered text joins (from the prefix's last `/` or
  // space), so only a `..` the command adds is refused, not one in the rule.
  const segmentStart = Math.max(prefix.lastIndexOf(' '), prefix.lastIndexOf('/')) + 1;
  if (DOT_DOT_SEGMENT.test(prefix.slice(segmentStart) + first)) return false;
  // Further words: non-empty (so no double or trailing space), safe, no option.
  for (const word of words.slice(1)) {
    if (!COVERED_WORD.test(word) || word.startsWith('-') || DOT_DOT_SEGMENT.test(word)) return false;
  }
  return true;
}

// Whether `command` is allowed by one of `rules`. Invalid rules never match
// (the definition validator refuses them; this is a second line).
export function commandAllowed(rules: readonly string[], command: string): boolean {
  if (typeof command !== 'string' || isUnmatchableCommand(command)) return false;
  return rules.some((rule) => {
    if (validateCommandRule(rule) !== null) return false;
    return isPrefixRule(rule) ? prefixRuleMatches(rule, command) : rule === command;
  });
}
