// Project rules that the type checker cannot see. Each rule: where it
// applies, what it forbids, and why.
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

const root = new URL('..', import.meta.url).pathname;

const RULES = [
  {
    dirs: ['daemon', 'shared'],
    pattern: /\bconsole\.(log|error|warn|info|debug)\(/,
    why: 'the daemon logs through pino (JSON on stderr); console output bypasses log levels and review',
  },
  {
    dirs: ['test'],
    pattern: /\bt\.(only|skip|todo)\(|\{\s*(skip|todo)\s*:/,
    why: 'a skipped test proves nothing',
  },
  {
    dirs: ['daemon', 'shared', 'cli'],
    pattern: /rejectUnauthorized\s*:\s*false|NODE_TLS_REJECT_UNAUTHORIZED\s*=/,
    why: 'certificate checks are never turned off',
  },
  {
    dirs: ['daemon', 'shared', 'cli'],
    pattern: /\beval\(|new Function\(/,
    why: 'no dynamic code',
  },
];

function* files(dir) {
  let entries;
  try {
    entries = readdirSync(dir);
  } catch {
    return;
  }
  for (const e of entries) {
    const p = join(dir, e);
    if (statSync(p).isDirectory()) yield* files(p);
    else if (/\.(ts|js|mjs)$/.test(e)) yield p;
  }
}

let problems = 0;
for (const rule of RULES) {
  for (const d of rule.dirs) {
    for (const f of files(join(root, d))) {
      const lines = readFileSync(f, 'utf8').split('\n');
      lines.forEach((line, i) => {
        if (rule.pattern.test(line)) {
          problems += 1;
          console.error(`${relative(root, f)}:${i + 1}: ${line.trim()}\n  -> ${rule.why}`);
        }
      });
    }
  }
}
if (problems > 0) {
  console.error(`lint: ${problems} problem(s)`);
  process.exit(1);
}
console.log('lint: ok');
