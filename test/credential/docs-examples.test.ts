// Every complete definition in docs/credentials.md is valid as written, and
// the README's quick-start definition (a shell here-document) too: the reference and the code agree.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseDefinitionToml } from '../../shared/credential';
import { ROOT } from '../helpers/repo-root';

function definitions(file: string): string[] {
  const text = readFileSync(join(ROOT, file), 'utf8');
  const fenced = [...text.matchAll(/```toml\n([\s\S]*?)```/g)].map((m) => m[1]!);
  const heredocs = [...text.matchAll(/<<'TOML'\n([\s\S]*?)\nTOML\n/g)].map((m) => m[1]!);
  return [...fenced, ...heredocs].filter((b) => /^name = /m.test(b));
}

for (const file of ['docs/credentials.md', 'README.md']) {
  t.test(file, async (t) => {
    const defs = definitions(file);
    t.ok(defs.length >= (file === 'README.md' ? 1 : 6), `${defs.length} definitions`);
    for (const d of defs) {
      const name = /^name = "([^"]+)"/m.exec(d)?.[1];
      t.doesNotThrow(() => parseDefinitionToml(d, name), `${name} is valid`);
    }
  });
}
