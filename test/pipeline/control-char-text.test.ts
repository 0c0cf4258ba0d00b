// Terminal output with colour escapes (git log --oneline --color, ls
// --color, git diff --color) is text, though ESC comes every few
// characters: only control characters other than ESC count toward the one
// in 16 that makes a body base64 (response.ts).
import t from 'tap';
import { isText } from '../../daemon/pipeline/response';

const E = '\x1b';
const samples: Record<string, string> = {
  'git log --oneline --color':
    Array.from({ length: 20 }, (_, i) => `${E}[33m${(0xabc123 + i).toString(16)}${E}[m fix thing ${i}`).join('\n') +
    '\n',
  'ls --color=always':
    ['bin', 'lib', 'src', 'test', 'docs'].map((n) => `${E}[0m${E}[01;34m${n}${E}[0m`).join('\n') + '\n',
  'git diff --color': Array.from({ length: 20 }, (_, i) => `${E}[32m+const x${i} = ${i};${E}[m`).join('\n') + '\n',
  'CI log with timestamps':
    Array.from({ length: 20 }, (_, i) => `2024-01-01T00:00:0${i % 10}.1234567Z ${E}[36;1mecho step ${i}${E}[0m`).join(
      '\n',
    ) + '\n',
};

t.test('coloured terminal text stays text (as docs/responses.md says)', async (t) => {
  for (const [k, v] of Object.entries(samples)) t.ok(isText('text/plain', Buffer.from(v)), `${k}: text`);
});
