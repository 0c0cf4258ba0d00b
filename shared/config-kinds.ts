// The kinds of setting value: each checks a raw TOML value (with the message
// a person reads when it is wrong) and says how it appears in the canonical
// form.
import * as path from 'node:path';
import { z } from 'zod';
import { CanonicalValue } from './canonical-json';
import { DURATION_UNITS, checkDuration, checkDurationAtMost, checkSize, quoteValue } from './units';
import { formatDnsServer, parseDnsServer } from './config-dns';
import {
  Check,
  Kind,
  LOG_FORMATS,
  LOG_LEVELS,
  LogFormat,
  LogLevel,
  OTHER_HOSTS,
  OtherHosts,
  PathRole,
} from './config-types';

function fromCheck<T>(check: (v: unknown) => Check<T>): z.ZodType<T> {
  return z.unknown().transform((v, ctx) => {
    const r = check(v);
    if (r.ok) return r.value;
    ctx.addIssue({ code: 'custom', message: r.message });
    return z.NEVER;
  });
}

const same = <T extends CanonicalValue>(v: T): CanonicalValue => v;

export const duration: Kind<number> = { schema: fromCheck(checkDuration), canonical: same, unit: 'duration' };
export const size: Kind<number> = { schema: fromCheck(checkSize), canonical: same, unit: 'size' };
// A journal segment holds at least one longest entry line (MAX_LINE_BYTES of
// shared/audit-format.ts): below that the writer would move to a new file,
// with its opening entries and a checkpoint, after nearly every entry.
export const MIN_AUDIT_SEGMENT_BYTES = 64 * 1024;
export const segmentSize: Kind<number> = {
  schema: fromCheck((v) => {
    const r = checkSize(v);
    return r.ok && r.value < MIN_AUDIT_SEGMENT_BYTES
      ? { ok: false, message: `${quoteValue(v)}: must be at least 64KiB (one longest journal line); e.g. "64MiB"` }
      : r;
  }),
  canonical: same,
  unit: 'size',
};

// An MCP tool result is one line on stdio, and clients stop reading a line
// at 10 MiB (the official SDK does); a result also needs room for its
// envelope around the body.
export const mcpResultSize: Kind<number> = {
  schema: fromCheck((v) => {
    const r = checkSize(v);
    if (!r.ok) return r;
    if (r.value > 8 * 1024 * 1024)
      return { ok: false, message: 'must be at most "8MiB": MCP clients read at most 10 MiB in one message' };
    if (r.value < 4096)
      return { ok: false, message: 'must be at least "4KiB", room for a result\'s summary and flags' };
    return r;
  }),
  canonical: same,
  unit: 'size',
};

// A leaf certificate lives at least an hour (it is cached until 90 % of its
// life, so shorter ones would be signed again every few minutes) and at most
// 30 days: it is checked against the clock, not waited for by a timer, and
// a longer life only widens the time a copied leaf key is good for.
export const leafValidity: Kind<number> = {
  schema: fromCheck((v) => {
    const r = checkDurationAtMost(v, 30 * DURATION_UNITS.d, '30d');
    return r.ok && r.value < DURATION_UNITS.h
      ? { ok: false, message: `${quoteValue(v)}: must be at least "1h"; e.g. "24h"` }
      : r;
  }),
  canonical: same,
  unit: 'duration',
};

export const otherHosts: Kind<OtherHosts> = {
  schema: z.enum(OTHER_HOSTS, {
    error: 'must be "tunnel" (relay the bytes, address rules applied) or "refuse"',
  }),
  canonical: same,
};

function checkPathText(v: unknown, role: PathRole): Check<string> {
  if (typeof v !== 'string') return { ok: false, message: 'must be a path in quotes, e.g. "agent.sock"' };
  if (v === '') {
    if (role === 'optional-file') return { ok: true, value: v };
    if (role === 'home')
      return { ok: false, message: 'must not be empty; remove the line to use POSTERN_HOME or ~/.postern' };
    return { ok: false, message: 'must not be empty; write a file name (relative to home) or an absolute path' };
  }
  if (v.includes('\0')) return { ok: false, message: 'must not contain a NUL character' };
  if (v.startsWith('~') && v !== '~' && !v.startsWith('~/')) {
    return { ok: false, message: `${quoteValue(v)}: only "~" and "~/…" are expanded; write the full path instead` };
  }
  if (role === 'home' && !path.isAbsolute(v) && !v.startsWith('~')) {
    return { ok: false, message: `${quoteValue(v)}: must be an absolute path or start with "~/"` };
  }
  return { ok: true, value: v };
}

export function pathKind(role: PathRole): Kind<string> {
  return { schema: fromCheck((v) => checkPathText(v, role)), canonical: same, path: role };
}

export const logLevel: Kind<LogLevel> = {
  schema: z.enum(LOG_LEVELS, { error: `must be one of ${LOG_LEVELS.map((l) => `"${l}"`).join(', ')}` }),
  canonical: same,
};

export const logFormat: Kind<LogFormat> = {
  schema: z.enum(LOG_FORMATS, { error: `must be one of ${LOG_FORMATS.map((f) => `"${f}"`).join(', ')}` }),
  canonical: same,
};

const MAX_UID = 4294967294; // (uid_t)-1 is "no uid" to the kernel

const uid = z
  .int({ error: 'must be a uid: a whole number such as 1001' })
  .min(0, { error: 'a uid cannot be negative' })
  .max(MAX_UID, { error: `a uid is at most ${MAX_UID}` });

// Sorted and deduplicated: the set is what matters, so [2, 1] and [1, 2]
// are the same config and hash the same.
export const uidList: Kind<number[]> = {
  schema: z
    .array(uid, { error: 'must be a list of uids, e.g. [1001, 1002]' })
    .transform((uids) => [...new Set(uids)].sort((a, b) => a - b)),
  canonical: same,
};

export const daemonUid: Kind<number> = {
  schema: z
    .int({ error: 'must be a uid (a whole number such as 999) or -1 for "the CLI\'s own uid"' })
    .min(-1, { error: 'must be a uid or -1' })
    .max(MAX_UID, { error: `a uid is at most ${MAX_UID}` }),
  canonical: same,
};

export const concurrency: Kind<number> = {
  schema: z
    .int({ error: 'must be a whole number such as 64' })
    .min(1, { error: 'must be at least 1' })
    .max(100000, { error: 'must be at most 100000' }),
  canonical: same,
};

export function formatMode(mode: number): string {
  return `0${mode.toString(8).padStart(3, '0')}`;
}

// Sockets are reached by connect(), which needs write permission; read and
// execute bits add nothing, and "other" bits would open the agent socket to
// every user on the machine, which the threat model never allows.
function checkSocketMode(v: unknown): Check<number> {
  const hint = 'use "0600" (owner only) or "0660" (owner and agent_socket_group)';
  if (typeof v !== 'string') return { ok: false, message: `must be an octal mode in quotes; ${hint}` };
  if (!/^0[0-7]{3}$/.test(v))
    return { ok: false, message: `${quoteValue(v)} is not an octal mode of four digits; ${hint}` };
  const mode = parseInt(v, 8);
  if (mode & 0o007)
    return { ok: false, message: `${quoteValue(v)} would let every user on the machine use the socket; ${hint}` };
  if (mode & 0o111)
    return { ok: false, message: `${quoteValue(v)} has execute bits, which a socket must not have; ${hint}` };
  if ((mode & 0o600) !== 0o600)
    return { ok: false, message: `${quoteValue(v)} denies the daemon's own uid read and write; ${hint}` };
  return { ok: true, value: mode };
}

export const socketMode: Kind<number> = { schema: fromCheck(checkSocketMode), canonical: (m: number) => formatMode(m) };

export const group: Kind<string> = {
  schema: z
    .string({ error: 'must be a group name or numeric gid in quotes, or "" for none' })
    .regex(/^(|[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?|[0-9]{1,10})$/, {
      error: 'must be a group name (letters, digits, "_", ".", "-") or a numeric gid, or "" for none',
    }),
  canonical: same,
};

// Normalised to "ip:port" / "[ipv6]:port", the form dns.Resolver#setServers takes.
export const dnsServers: Kind<string[]> = {
  schema: z.array(
    fromCheck((v) => {
      if (typeof v !== 'string') return { ok: false, message: 'must be an address in quotes, e.g. "127.0.0.1:5353"' };
      const r = parseDnsServer(v);
      return r.ok ? { ok: true, value: formatDnsServer(r.value) } : r;
    }),
    { error: 'must be a list of addresses, e.g. ["127.0.0.1:5353"], or [] for the system resolver' },
  ),
  canonical: same,
};
