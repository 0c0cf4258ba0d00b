// The servers an identity test needs besides the daemon: an HTTPS upstream
// for api.example.test under a throwaway CA, and a DNS server answering
// 127.0.0.1 for it; all closed at the test's teardown.
import { echo, makeTestCa, startHttpsUpstream, TestCa, Upstream } from './https-upstream';
import { startDnsServer, zone } from './dns-server';

interface Teardown {
  teardown(fn: () => unknown): void;
}

export async function startUpstream(
  t: Teardown,
): Promise<{ ca: TestCa; up: Upstream; dns: Awaited<ReturnType<typeof startDnsServer>> }> {
  const ca = makeTestCa(['api.example.test']);
  t.teardown(() => ca.cleanup());
  const up = await startHttpsUpstream(ca, echo);
  t.teardown(() => up.close());
  const dns = await startDnsServer(zone({ 'api.example.test': { A: ['127.0.0.1'] } }));
  t.teardown(() => dns.close());
  return { ca, up, dns };
}
