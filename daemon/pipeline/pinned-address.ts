// SPEC §6.1 step 4 and what step 8 connects through: one resolution with
// every address classified, and the connection pool pinned to the address
// found. Used by every HTTP request, whichever front door it came through
// (run-http.ts, run-proxied.ts), by the token endpoints of computed credentials
// (computed/token-endpoint.ts) and by the proxy's tunnels (proxy/tunnel.ts).
import type { Pool } from 'undici';
import type { HttpCredentialDef } from '../../shared/credential';
import { assertAllAllowed } from './classify';
import type { PipelineServices } from './context';
import { dnsServers, resolveTarget, type ResolvedAddress } from './resolve';
import { formatOrigin, type Target } from './target';

// 4. one resolution; every address classified (allow_addresses: the
// credential's, none without one); the first is the one connected to.
export async function resolveChecked(
  s: PipelineServices,
  target: Target,
  allowAddresses: HttpCredentialDef['allow_addresses'],
): Promise<{ addresses: ResolvedAddress[]; pinned: ResolvedAddress }> {
  const cfg = s.config();
  const resolution = await s.untilLocked(
    resolveTarget(target.host.replace(/^\[|\]$/g, ''), target.hostKind, {
      dnsServers: dnsServers(cfg.http.dns_servers),
      timeoutMs: Math.min(cfg.http.timeout, 10_000),
    }),
  );
  assertAllAllowed(
    target.host,
    resolution.addresses.map((a) => a.address),
    allowAddresses,
  );
  return { addresses: resolution.addresses, pinned: resolution.addresses[0]! };
}

// The pool of (credential, requester, origin, checked address); a request
// without a credential has pools of its own ('' is no credential's name).
// The requester: the process instance whose requests it carries
// (daemon/stores/pinned-pools.ts says why).
export function pinnedPool(
  s: PipelineServices,
  credential: string | null,
  requester: string,
  target: Target,
  pinned: ResolvedAddress,
): Pool {
  return s.stores.pools.get({
    credential: credential ?? '',
    requester,
    origin: formatOrigin(target),
    address: pinned.address,
    family: pinned.family,
  });
}
