// The computed credentials' token cache counts a token's life by both
// clocks: a wall clock stepped back (NTP, a user setting the date) served a
// cached OAuth or GitHub App token past its expires_in, for as long as the
// step (the upstream then answered 401 until the clock caught up).
import t from 'tap';
import { TokenCache } from '../../daemon/pipeline/computed/github-app';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

t.test('a clock stepped back an hour does not keep an expired token', async (t) => {
  const cache = new TokenCache();
  const obtained = new Date();
  // Two seconds of life: refreshed after one (half its life).
  cache.put('api', 'hash', 'tok-1', new Date(obtained.getTime() + 2000), cache.ticket(), obtained);
  t.equal(cache.get('api', 'hash', new Date()), 'tok-1', 'fresh: served');
  await sleep(1300);
  const steppedBack = new Date(Date.now() - 3600_000);
  t.equal(cache.get('api', 'hash', steppedBack), null, 'past its refresh time by the monotonic clock: obtained again');
});

t.test('a clock stepped forward still ends a token (the wall clock counts too)', async (t) => {
  const cache = new TokenCache();
  const obtained = new Date();
  cache.put('api', 'hash', 'tok-2', new Date(obtained.getTime() + 3600_000), cache.ticket(), obtained);
  t.equal(cache.get('api', 'hash', new Date(obtained.getTime() + 2 * 3600_000)), null, 'after a suspend of two hours');
});
