// postern's version, read from package.json: it sits above dist/ once
// compiled, and above shared/ in the source. Sent as User-Agent
// (`postern/<version>`) and printed by `postern --version`.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

let cached: string | null = null;

export function packageVersion(): string {
  if (cached !== null) return cached;
  for (const rel of ['../../package.json', '../package.json']) {
    try {
      const v = JSON.parse(readFileSync(join(__dirname, rel), 'utf8')) as { name?: string; version?: string };
      if (v.name === 'postern' && typeof v.version === 'string') return (cached = v.version);
    } catch {
      // try the next
    }
  }
  return (cached = '0.0.0');
}
