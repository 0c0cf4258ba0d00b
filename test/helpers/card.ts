// A pending-approval card as the daemon pushes it to an approver, for
// tests that drive the approver without a daemon.
import type { Card } from '../../cli/approver/card';

export function testCard(o: {
  id: string;
  pid: number;
  credential?: string;
  approve?: Card['approve'];
  ancestors?: Card['ancestors'];
}): Card {
  return {
    id: o.id,
    credential: o.credential ?? `cred-${o.id}`,
    approve: o.approve ?? 'session',
    created_at: '',
    expires_at: '',
    process: {
      key: `k${o.pid}`,
      pid: o.pid,
      uid: 0,
      exe: '/bin/agent',
      exe_deleted: false,
      exe_memfd: false,
      cwd: '/',
      cmdline: ['agent'],
    },
    ancestors: o.ancestors ?? [],
    action: {
      kind: 'http',
      method: 'GET',
      scheme: 'https',
      host: 'h.example',
      address: '1.2.3.4',
      port: 443,
      path: '/',
      query: '',
      body_bytes: 0,
      body_sha256: null,
    },
  };
}
