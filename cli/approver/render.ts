// A card as lines of terminal text (SPEC §7): the credential and its approve
// mode, the concrete action, the process chain (requester first), and the
// keys that decide. Every string that came from the card goes through
// escape.ts; a field of the action this file does not know is still shown,
// so nothing the daemon sends is hidden from the human.
import type { Card, CardProcess } from './card';
import { choicesFor, MAX_ANCESTOR_KEYS } from './keys';
import { charColumns, columnsOf, escapeText, hasHidden, quoteArg, showExe, showHost } from './escape';
import { EXE_MISMATCH_NOTE, NOT_READABLE, OTHER_MOUNT_NS_NOTE } from '../../shared/admin-protocol';

// Command-line arguments shown per process; the rest is counted.
export const MAX_ARGS_SHOWN = 64;
const HIDDEN_FLAG = '  <- holds escaped characters';

type Show = (v: unknown) => string;

// One line of the action: label, the card fields it may come from (first
// present wins), and how to show the value.
interface Field {
  label: string;
  names: string[];
  show?: Show;
  missing?: string; // shown when the card has none of `names`
  optional?: boolean; // not shown when the card has none of `names`
}

function plain(v: unknown): string {
  if (typeof v === 'string') return escapeText(v) + (hasHidden(v) ? HIDDEN_FLAG : '');
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (Array.isArray(v)) return v.map(plain).join(', ');
  if (v === null || v === undefined) return '(none)';
  return escapeText(JSON.stringify(v));
}

const host: Show = (v) => (typeof v === 'string' ? showHost(v) + (hasHidden(v) ? HIDDEN_FLAG : '') : plain(v));
const addresses: Show = (v) => `${plain(v)}  (checked; the connection goes only there)`;
const query: Show = (v) => (v === '' || v === undefined || v === null ? '(none)' : plain(v));
const bytes: Show = (v) => (typeof v === 'number' ? `${v} byte${v === 1 ? '' : 's'}` : plain(v));
// The agent's reason (SPEC §7): quoted and escaped like an argument, and
// marked as the agent's own words, which nothing checked.
const agentWords: Show = (v) =>
  typeof v === 'string'
    ? `${quoteArg(v)}  <- the agent's words, not checked by postern${hasHidden(v) ? '; holds escaped characters' : ''}`
    : plain(v);
// A request through the proxy front door: the connecting descendant is the
// word of the card's process, the root of a run (normally `postern run`;
// any process may start a run), which the daemon does not check.
const via: Show = (v) => (v === 'proxy' ? 'the proxy front door' : plain(v));
const reportedPid: Show = (v) =>
  `${typeof v === 'number' ? `pid ${v}` : 'unknown'}  <- reported by the requester (the run's root, normally postern run), not checked by the kernel`;
const computedKind: Show = (v) =>
  v === 'aws_sigv4'
    ? 'AWS Signature V4: postern signs the request'
    : v === 'github_app'
      ? 'GitHub App: postern obtains an installation token'
      : v === 'oauth2'
        ? 'OAuth 2.0: postern obtains an access token'
        : String(v);
const REASON: Field = { label: 'reason', names: ['reason'], show: agentWords, missing: '(none given by the agent)' };

const ACTION_FIELDS: Readonly<Record<string, { title: string; fields: Field[] }>> = {
  http: {
    title: 'HTTP request',
    fields: [
      { label: 'method', names: ['method'] },
      { label: 'scheme', names: ['scheme'] },
      { label: 'host', names: ['host'], show: host },
      { label: 'address', names: ['address', 'addresses', 'checked_address'], show: addresses },
      { label: 'port', names: ['port'] },
      { label: 'path', names: ['path'] },
      { label: 'query', names: ['query'], show: query },
      { label: 'body size', names: ['body_size', 'body_bytes', 'body_length'], show: bytes },
      { label: 'body sha256', names: ['body_sha256', 'body_hash'] },
      REASON,
      { label: 'via', names: ['via'], show: via, optional: true },
      { label: 'connection', names: ['proxy_client_pid'], show: reportedPid, optional: true },
      { label: 'credential', names: ['computed'], show: computedKind, optional: true },
      { label: 'token from', names: ['token_endpoint'], optional: true },
    ],
  },
  ssh: {
    title: 'SSH command',
    fields: [
      { label: 'host', names: ['host'], show: host },
      { label: 'address', names: ['address', 'addresses', 'checked_address'], show: addresses },
      { label: 'port', names: ['port'] },
      { label: 'user', names: ['user'] },
      { label: 'command', names: ['command'] },
      { label: 'stdin size', names: ['stdin_size', 'stdin_bytes'], show: bytes },
      { label: 'stdin sha256', names: ['stdin_sha256', 'stdin_hash'] },
      REASON,
    ],
  },
  // A login by an OpenSSH client through the ssh-agent front door (SPEC §12).
  'ssh-agent': {
    title: 'SSH login through the ssh-agent (the client chooses what runs once logged in)',
    fields: [
      { label: 'host', names: ['host'], show: host },
      { label: 'host key', names: ['host_key'] },
      { label: 'user', names: ['user'] },
      { label: 'key', names: ['algorithm'] },
    ],
  },
};

const LABEL_WIDTH = 12;

function row(indent: string, label: string, value: string): string {
  return `${indent}${label.padEnd(LABEL_WIDTH)} ${value}`;
}

function actionLines(action: Record<string, unknown>): string[] {
  const kind = typeof action['kind'] === 'string' ? action['kind'] : '';
  const known = ACTION_FIELDS[kind];
  const used = new Set(['kind']);
  const lines = [known ? known.title : `action of an unknown kind ${quoteArg(kind)} (every field shown)`];
  for (const f of known?.fields ?? []) {
    const name = f.names.find((n) => action[n] !== undefined);
    for (const n of f.names) used.add(n);
    if (name === undefined && f.optional) continue;
    lines.push(
      row(
        '    ',
        f.label,
        name === undefined ? (f.missing ?? '(not given by the daemon)') : (f.show ?? plain)(action[name]),
      ),
    );
  }
  for (const [name, value] of Object.entries(action)) {
    if (!used.has(name)) lines.push(row('    ', escapeText(name, 40), plain(value)));
  }
  return lines;
}

const FLAG_PROCESS = '  <- holds escaped characters: read carefully';

function argvText(p: CardProcess): string {
  if (p.cmdline.length === 0) return '(empty)';
  const more =
    p.cmdline.length > MAX_ARGS_SHOWN ? ` … [${p.cmdline.length - MAX_ARGS_SHOWN} more arguments not shown]` : '';
  return (
    p.cmdline
      .slice(0, MAX_ARGS_SHOWN)
      .map((a) => quoteArg(a))
      .join(' ') + more
  );
}

function processHead(p: CardProcess, title: string, key: string | undefined): string {
  return `  ${key ? `[${key}]` : '   '} ${title.padEnd(11)} pid ${p.pid}${p.uid >= 0 ? `  uid ${p.uid}` : ''}  exe ${showExe(p.exe, p.exe_deleted, p.exe_memfd)}`;
}

const flagged = (p: CardProcess): string => ([p.exe, p.cwd, ...p.cmdline].some(hasHidden) ? FLAG_PROCESS : '');

// The requester gets three lines; each ancestor one (a chain can be long,
// and the card must fit a terminal).
function requesterLines(p: CardProcess, key: string | undefined): string[] {
  return [
    processHead(p, 'requester', key) + flagged(p),
    row('        ', 'cwd', escapeText(p.cwd)),
    row('        ', 'argv', argvText(p)),
    ...noteLines(p),
  ];
}

// What the daemon could not vouch for, in words, under the requester.
export function noteLines(p: CardProcess): string[] {
  const notes: string[] = [];
  if (p.exe === NOT_READABLE || p.cwd === NOT_READABLE) {
    notes.push(
      'the executable and directory are not readable by the daemon (a process of another user); it is identified by uid, pid, start time, parent chain and command line',
    );
  }
  if (p.exe.includes(OTHER_MOUNT_NS_NOTE) || p.exe.includes(EXE_MISMATCH_NOTE)) {
    notes.push('WARNING: the exe path shown may not be the program that runs (see the note on the exe)');
  }
  return notes.map((n) => row('        ', 'note', n));
}

// In a terminal `columns` wide, an ancestor's line is cut to one row, with
// the count of what was cut, so that a deep chain of long command lines
// cannot push the action off the screen. The hidden-character flag, decided
// on the whole line, is never cut.
function ancestorLine(p: CardProcess, depth: number, key: string | undefined, columns: number | undefined): string {
  const flag = flagged(p);
  const text = `${processHead(p, `ancestor ${depth}`, key)}  cwd ${escapeText(p.cwd)}  argv ${argvText(p)}`;
  const chars = [...text];
  const room = columns === undefined ? Infinity : columns - 1 - flag.length;
  if (columnsOf(text) <= room) return text + flag;
  // Room for the marker " … [+N chars]" with N of up to six digits; kept
  // by columns (a wide character takes two).
  const keepColumns = Math.max(0, room - 19);
  let kept = 0;
  let used = 0;
  while (kept < chars.length && used + charColumns(chars[kept]!) <= keepColumns) used += charColumns(chars[kept++]!);
  return `${chars.slice(0, kept).join('')} … [+${chars.length - kept} chars]${flag}`;
}

// Ancestors past the last one a key can choose are summed up in one line.
function chainLines(card: Card, keyOf: (rootKey: string) => string | undefined, columns: number | undefined): string[] {
  const shown = card.ancestors.slice(0, MAX_ANCESTOR_KEYS).map((a, i) => ancestorLine(a, i + 1, keyOf(a.key), columns));
  const rest = card.ancestors.slice(MAX_ANCESTOR_KEYS);
  if (rest.length === 0) return shown;
  const top = rest[rest.length - 1]!;
  const flag = rest.some((p) => flagged(p) !== '') ? FLAG_PROCESS : '';
  return [
    ...shown,
    `      … ${rest.length} more ancestor${rest.length === 1 ? '' : 's'} up to pid ${top.pid} (exe ${showExe(top.exe, top.exe_deleted, top.exe_memfd)}); no session can be rooted there from this card${flag}`,
  ];
}

// The keys, in two lines: the session keys are marked on the chain itself.
function keyLines(card: Card): string[] {
  const choices = choicesFor(card);
  const lines = ['  d  deny      o  allow once      q  quit the approver (pending requests stay pending)'];
  if (card.approve !== 'session') return [...lines, '  (each-use: no session can be approved for this credential)'];
  const parts: string[] = [];
  const s = choices.find((c) => c.key === 's');
  if (s) parts.push(`s  ${s.label}`);
  const digits = choices.filter((c) => /^[1-9]$/.test(c.key));
  if (digits.length === 1) parts.push(`1  ${digits[0]!.label}`);
  else if (digits.length > 1)
    parts.push(`1…${digits.length}  session rooted at that ancestor (marked [1]…[${digits.length}] above)`);
  return parts.length ? [...lines, `  ${parts.join('      ')}`] : lines;
}

function expiry(card: Card): string {
  const at = Date.parse(card.expires_at);
  if (Number.isNaN(at)) return '(not given)';
  return `${new Date(at).toTimeString().slice(0, 8)} (without a decision by then, the request is refused)`;
}

export interface RenderOptions {
  // Cards waiting behind this one.
  waiting?: number;
  // The terminal's width, when known: ancestor lines are cut to fit it.
  columns?: number;
}

export function renderCard(card: Card, opts: RenderOptions = {}): string[] {
  const choices = choicesFor(card);
  const keyOf = (rootKey: string): string | undefined =>
    choices.find((c) => c.args.root_key === rootKey && rootKey !== '')?.key;
  const waiting = opts.waiting ?? 0;
  const lines = [
    `Approval request ${escapeText(card.id, 40)}${waiting > 0 ? `   (${waiting} more waiting)` : ''}`,
    row('  ', 'credential', escapeText(card.credential)),
    row(
      '  ',
      'approve',
      card.approve === 'session'
        ? 'session (a session may be approved)'
        : 'each-use (asks every time: allow once or deny)',
    ),
    row('  ', 'expires', expiry(card)),
    '',
    `  ${actionLines(card.action).join('\n')}`,
    '',
    '  Process chain, requester first (a session covers the chosen process and everything it starts):',
    ...requesterLines(card.process, keyOf(card.process.key)),
    ...chainLines(card, keyOf, opts.columns),
    '',
    ...keyLines(card),
  ];
  return lines.flatMap((l) => l.split('\n'));
}
