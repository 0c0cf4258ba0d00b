// The repository's root: the nearest directory above this file holding
// package.json. Tests run compiled (test-build/test/…), so a path counted
// up from __dirname would land inside test-build.
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';

function findRoot(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    if (dirname(dir) === dir) throw new Error(`no package.json above ${from}`);
  }
}

export const ROOT = findRoot(__dirname);

// A file of the test tree as written (helpers in Python or JavaScript,
// fixtures): tsc copies none of them into test-build.
export function testSource(...parts: string[]): string {
  return join(ROOT, 'test', ...parts);
}
