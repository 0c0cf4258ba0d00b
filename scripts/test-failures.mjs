// Prints each failed assertion of a tap log with the test file it belongs to
// and the lines around it (tap's diagnostics follow a failure).
import { readFileSync } from 'node:fs';

const lines = readFileSync(process.argv[2], 'utf8').split('\n');
const BEFORE = 4;
const AFTER = 24;
const MAX_SHOWN = 12;
let file = '(unknown file)';
let shown = 0;
let until = -1; // lines already printed
for (let i = 0; i < lines.length && shown < MAX_SHOWN; i++) {
  const m = /^# Subtest: (\S+\.test\.[jt]s)/.exec(lines[i]);
  if (m) file = m[1];
  if (!/^\s*not ok /.test(lines[i]) || i <= until) continue;
  shown += 1;
  const from = Math.max(until + 1, i - BEFORE);
  until = Math.min(lines.length - 1, i + AFTER);
  console.log(`\n---- ${file}, log line ${i + 1}`);
  console.log(lines.slice(from, until + 1).join('\n'));
}
if (shown === 0) console.log('no "not ok" line: look in the log for a crash or a timeout');
