// Project rules that the type checker cannot see. Each rule: where it
// applies, what it forbids, and why.
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';

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
// No import cycles among the modules that run (imports of types only are
// erased and do not count): a cycle makes a module's exports depend on
// which of the two was loaded first, and hides which one is the lower layer.
function valueImports(file) {
  const out = [];
  for (const m of readFileSync(file, 'utf8').matchAll(/^import\s+([^;]*?)\s+from\s+'(\.[^']+)'/gms)) {
    const what = m[1];
    if (what.startsWith('type ')) continue;
    const braces = /^\{([^}]*)\}$/.exec(what.trim());
    if (braces && braces[1].split(',').every((n) => n.trim() === '' || n.trim().startsWith('type '))) continue;
    const base = join(dirname(file), m[2]);
    const target = [`${base}.ts`, join(base, 'index.ts')].find((p) => existsSync(p));
    if (target) out.push(target);
  }
  return out;
}
const graph = new Map();
for (const d of ['daemon', 'shared', 'cli'])
  for (const f of files(join(root, d))) if (f.endsWith('.ts')) graph.set(f, valueImports(f));
const done = new Set();
const path = [];
function visit(f) {
  if (done.has(f)) return;
  const at = path.indexOf(f);
  if (at !== -1) {
    problems += 1;
    const cycle = [...path.slice(at), f].map((p) => relative(root, p)).join(' -> ');
    console.error(`import cycle: ${cycle}\n  -> move what both need into a module of its own`);
    return;
  }
  path.push(f);
  for (const g of graph.get(f) ?? []) visit(g);
  path.pop();
  done.add(f);
}
for (const f of graph.keys()) visit(f);

if (problems > 0) {
  console.error(`lint: ${problems} problem(s)`);
  process.exit(1);
}
console.log('lint: ok');
