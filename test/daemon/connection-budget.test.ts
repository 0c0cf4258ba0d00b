// The descriptor budget of the agent-facing sockets (connection-budget.ts):
// read from /proc/self/limits, and always leaving the reserve for the
// daemon's own files and the admin socket, however small the limit.
import t from 'tap';
import { connectionBudget } from '../../daemon/connection-budget';
import { openFileLimit } from '../../shared/open-file-limit';

const limits = (soft: string, hard = soft): string =>
  `Limit                     Soft Limit           Hard Limit           Units     \nMax processes             95436                95436                processes \nMax open files            ${soft.padEnd(20)} ${hard.padEnd(20)} files     \n`;

t.test('the soft limit is read from /proc/self/limits', async (t) => {
  t.equal(openFileLimit(limits('256', '4096')), 256);
  t.equal(openFileLimit(limits('unlimited')), Number.MAX_SAFE_INTEGER);
  t.equal(openFileLimit(''), null, 'no line: unknown');
  t.equal(openFileLimit(limits('0')), null, 'nonsense: unknown');
  t.equal(openFileLimit(limits('-5')), null);
  t.equal(openFileLimit(limits('abc')), null);
  const own = openFileLimit();
  t.ok(own !== null && own > 0, `this process's own limit is read (${own})`);
});

t.test('the budget leaves the reserve, at every limit', async (t) => {
  for (const limit of [64, 128, 256, 1024, 4096, 20_000, 1_048_576]) {
    const b = connectionBudget(limit);
    const used = 2 * (b.agentConnections + b.sshAgentConnections) + 3 * b.heldProcesses;
    if (limit >= 256)
      t.ok(used <= limit - 64, `limit ${limit}: at most ${used} descriptors for agents, ${limit - used} left`);
    t.ok(b.agentConnections >= 8 && b.sshAgentConnections >= 4, `limit ${limit}: a few connections always`);
    t.ok(b.heldProcesses >= 8 && b.heldProcesses <= 128, `limit ${limit}: ${b.heldProcesses} held processes`);
  }
  t.same(connectionBudget(1_048_576).heldProcesses, 128, 'held processes capped at 128');
});
