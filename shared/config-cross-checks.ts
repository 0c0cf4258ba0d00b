// Checks that span keys, run on the values that are valid on their own.
import { Problem } from './errors';
import { quoteValue } from './units';
import { ConfigPath } from './config-types';

export type Values = Map<ConfigPath, unknown>;

// Longest sun_path Linux accepts (108 bytes including the terminating NUL).
const MAX_SOCKET_PATH_BYTES = 107;

function socketLength(p: ConfigPath): { needs: ConfigPath[]; problems(v: Values): Problem[] } {
  return {
    needs: [p],
    problems: (v) => {
      const full = String(v.get(p));
      const n = Buffer.byteLength(full);
      return n > MAX_SOCKET_PATH_BYTES
        ? [
            {
              path: p,
              message: `${quoteValue(full)} is ${n} bytes; a Unix socket path may have at most ${MAX_SOCKET_PATH_BYTES}: choose a shorter home or an absolute socket path`,
            },
          ]
        : [];
    },
  };
}

const OWN_FILES: ConfigPath[] = [
  'daemon.home',
  'daemon.agent_socket',
  'daemon.admin_socket',
  'daemon.vault',
  'daemon.audit_log',
];

export const CROSS_CHECKS: readonly { needs: ConfigPath[]; problems(v: Values): Problem[] }[] = [
  {
    needs: ['http.timeout', 'http.max_timeout'],
    problems: (v) =>
      Number(v.get('http.timeout')) > Number(v.get('http.max_timeout'))
        ? [{ path: 'http.timeout', message: 'is longer than http.max_timeout; raise max_timeout or lower timeout' }]
        : [],
  },
  socketLength('daemon.agent_socket'),
  socketLength('daemon.admin_socket'),
  {
    // Two roles sharing one path would overwrite each other.
    needs: OWN_FILES,
    problems: (v) => {
      const seen = new Map<string, ConfigPath>();
      const out: Problem[] = [];
      for (const p of OWN_FILES) {
        const full = String(v.get(p));
        const first = seen.get(full);
        if (first)
          out.push({
            path: p,
            message: `resolves to the same path as ${first} (${quoteValue(full)}); give each its own path`,
          });
        else seen.set(full, p);
      }
      return out;
    },
  },
];
