// The system's DNS servers: the `nameserver` lines of /etc/resolv.conf, port
// 53. The file is read again when its mtime or size changes, looked at (one
// stat) at most once a second, not per query. None listed, or no file:
// 127.0.0.1 and ::1, as c-ares does.
import { readFileSync, statSync } from 'node:fs';
import { isIPv4, isIPv6 } from 'node:net';
import type { DnsServer } from '../../../shared/config';

const RECHECK_MS = 1000;
const FALLBACK: readonly DnsServer[] = [
  { address: '127.0.0.1', port: 53, family: 4 },
  { address: '::1', port: 53, family: 6 },
];

export function parseResolvConf(text: string): DnsServer[] {
  const out: DnsServer[] = [];
  for (const line of text.split('\n')) {
    const words = line
      .replace(/[#;].*/, '')
      .trim()
      .split(/\s+/);
    if (words[0] !== 'nameserver' || words[1] === undefined) continue;
    const address = words[1];
    // A zone id ("fe80::1%eth0") is kept: the socket needs it for link-local.
    if (isIPv4(address)) out.push({ address, port: 53, family: 4 });
    else if (isIPv6(address.replace(/%[^%]+$/, ''))) out.push({ address, port: 53, family: 6 });
  }
  return out;
}

export class SystemServers {
  private servers: readonly DnsServer[] = FALLBACK;
  private stamp = '';
  private checkedAt = -Infinity;

  constructor(
    private readonly path = '/etc/resolv.conf',
    private readonly now: () => number = () => performance.now(),
  ) {}

  current(): readonly DnsServer[] {
    const t = this.now();
    if (t - this.checkedAt < RECHECK_MS) return this.servers;
    this.checkedAt = t;
    let stamp: string;
    try {
      const st = statSync(this.path, { bigint: true });
      stamp = `${st.mtimeNs}|${st.size}|${st.ino}`;
    } catch {
      stamp = 'missing';
    }
    if (stamp === this.stamp) return this.servers;
    this.stamp = stamp;
    let listed: DnsServer[] = [];
    try {
      if (stamp !== 'missing') listed = parseResolvConf(readFileSync(this.path, 'utf8'));
    } catch {
      // Unreadable now: as if empty, read again when it changes.
    }
    this.servers = listed.length > 0 ? listed : FALLBACK;
    return this.servers;
  }
}
