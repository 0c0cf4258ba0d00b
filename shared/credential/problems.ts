// A definition's problems as the author reads them: each at its path, with
// hints for missing and unknown keys, in document order.
import { z } from 'zod';
import { Problem } from '../errors';
import { closest } from '../suggest';
import { quote } from './text';
import {
  HTTP_KEYS,
  SSH_KEYS,
  INJECT_KEYS,
  ALLOW_RULE_KEYS,
  AWS_SIGV4_KEYS,
  GITHUB_APP_KEYS,
  OAUTH2_KEYS,
} from './types';

// Hints appended to "is required", by key.
export const REQUIRED_HINTS: Readonly<Record<string, string>> = {
  name: 'the name agents use, e.g. name = "github"',
  kind: 'kind = "http" or kind = "ssh"',
  inject: 'add an [inject] table with one of header (+ template), basic_user or query',
  allow: 'add at least one [[allow]] rule with a host',
  host: 'e.g. host = "api.example.com"',
  user: 'the remote user, e.g. user = "deploy"; there is no default',
  auth: 'auth = "key" or auth = "password"',
  host_key: 'the pinned fingerprint, as `ssh-keygen -lf <host key>.pub` prints it',
  commands: 'the allowed commands, e.g. commands = ["systemctl restart app-*"]',
};

const COMMON_KEYS = ['name', 'description', 'kind', 'approve', 'allow_addresses'] as const;

// The keys allowed in each table, for "unknown key" messages.
function allowedKeys(kind: 'http' | 'ssh' | null, path: readonly PropertyKey[]): readonly string[] {
  if (path.length === 0) return kind === 'ssh' ? SSH_KEYS : kind === 'http' ? HTTP_KEYS : COMMON_KEYS;
  if (path[0] === 'inject' && path[1] === 'aws_sigv4') return AWS_SIGV4_KEYS;
  if (path[0] === 'inject' && path[1] === 'github_app') return GITHUB_APP_KEYS;
  if (path[0] === 'inject' && path[1] === 'oauth2') return OAUTH2_KEYS;
  if (path[0] === 'inject') return INJECT_KEYS;
  if (path[0] === 'allow') return ALLOW_RULE_KEYS;
  return [];
}

const BARE_KEY = /^[A-Za-z0-9_-]+$/;

export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const seg of path) {
    if (typeof seg === 'number') out += `[${seg}]`;
    else {
      const key = String(seg);
      out += `${out ? '.' : ''}${BARE_KEY.test(key) ? key : quote(key)}`;
    }
  }
  return out;
}

// A problem before its path is printed, so problems can be sorted.
export interface Found {
  at: PropertyKey[];
  message: string;
}

// Top-level keys of one kind only, with what to do when the other kind has one.
const OTHER_KIND_KEYS: Readonly<Record<'http' | 'ssh', Readonly<Record<string, string>>>> = {
  http: {},
  ssh: {
    env: 'is only for HTTP credentials, whose placeholder `postern run` puts in these variables for the proxy front door; an SSH credential is used through POST /v1/ssh or the ssh-agent front door: remove env',
  },
};

export function issueProblems(issue: z.core.$ZodIssue, kind: 'http' | 'ssh' | null): Found[] {
  if (issue.code === 'unrecognized_keys') {
    const allowed = allowedKeys(kind, issue.path);
    return issue.keys.map((key) => {
      const others = kind && issue.path.length === 0 ? OTHER_KIND_KEYS[kind] : {};
      const otherKind = Object.prototype.hasOwnProperty.call(others, key) ? others[key] : undefined;
      if (otherKind !== undefined) return { at: [...issue.path, key], message: otherKind };
      const guess = closest(key, allowed);
      const hint = guess ? `did you mean ${guess}?` : allowed.length ? `allowed here: ${allowed.join(', ')}` : '';
      return { at: [...issue.path, key], message: `unknown key; remove it${hint ? ` (${hint})` : ''}` };
    });
  }
  let message = issue.message;
  const last = issue.path[issue.path.length - 1];
  const hint = typeof last === 'string' ? REQUIRED_HINTS[last] : undefined;
  if (message === 'is required' && hint) message = `is required: ${hint}`;
  return [{ at: [...issue.path], message }];
}

// Document order: keys in print order (unknown keys after known ones),
// list entries by index; the sort is stable, so one path keeps its order.
export function sortedProblems(found: Found[], kind: 'http' | 'ssh' | null): Problem[] {
  const rank = (at: PropertyKey[], depth: number): number => {
    const seg = at[depth];
    if (typeof seg === 'number') return seg;
    const keys = allowedKeys(kind, at.slice(0, depth));
    const i = keys.indexOf(String(seg));
    return i === -1 ? keys.length : i;
  };
  const compare = (a: Found, b: Found): number => {
    for (let d = 0; d < Math.min(a.at.length, b.at.length); d += 1) {
      const diff = rank(a.at, d) - rank(b.at, d);
      if (diff !== 0) return diff;
    }
    return a.at.length - b.at.length;
  };
  return [...found].sort(compare).map((f) => ({ path: formatPath(f.at), message: f.message }));
}
