// `postern daemon` sets the old generation's growth factor unless node's
// command line chose one (daemon/heap-growth.ts); its effect on peak memory
// is measured by `make bench`'s yardsticks, not asserted here.
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { HEAP_GROWING_PERCENT, limitHeapGrowth } from '../../daemon/heap-growth';
import { ROOT } from '../helpers/repo-root';

t.test('set unless the command line gave the flag, in either spelling', async (t) => {
  t.equal(limitHeapGrowth([]), true);
  t.equal(limitHeapGrowth(['--inspect']), true);
  t.equal(limitHeapGrowth(['--heap-growing-percent-x']), true, 'another flag is not this one');
  t.equal(limitHeapGrowth(['--heap-growing-percent=20']), false);
  t.equal(limitHeapGrowth(['--heap_growing_percent=20']), false);
  t.equal(limitHeapGrowth(['--max-semi-space-size=8', '--heap-growing-percent', '20']), false);
  t.ok(HEAP_GROWING_PERCENT > 0 && HEAP_GROWING_PERCENT < 300, 'a factor between 1 and 4');
});

t.test('node takes the flag at run time without complaint', async (t) => {
  const dist = join(ROOT, 'dist', 'daemon', 'heap-growth.js');
  const r = spawnSync(
    process.execPath,
    ['-e', `const ok = require(${JSON.stringify(dist)}).limitHeapGrowth(); console.log(ok)`],
    { encoding: 'utf8' },
  );
  t.equal(r.status, 0, r.stderr);
  t.equal(r.stdout.trim(), 'true');
  t.equal(r.stderr, '', 'no warning printed');
});
