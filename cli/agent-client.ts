// One call to the agent socket, as an agent makes it: HTTP/1.1 over the
// Unix socket, JSON in and out. Used by `postern request` and the MCP
// bridge. Aborting the call closes its connection, which withdraws a
// request still waiting for approval (SPEC §6.1).
import http from 'node:http';
import { statSync } from 'node:fs';
import { Unreachable } from './errors';
import { WAITING_NOTICE, type ApprovalNotice } from '../shared/protocol';

export interface AgentReply {
  status: number;
  json: Record<string, unknown>;
}

export interface AgentCallOptions {
  signal?: AbortSignal;
  // Asks for the waiting notice: told the approval's id and expiry when
  // the request starts to wait for a human, and again once one approved it.
  onWaiting?: (approval: ApprovalNotice) => void;
  // With onWaiting: told at each informational answer, notices and the
  // daemon's heartbeat alike (the daemon is still at work).
  onHeard?: () => void;
}

// The agent socket: POSTERN_AGENT_SOCKET when set (SPEC §3), else the config's.
export function agentSocketPath(env: NodeJS.ProcessEnv, fromConfig: () => string): string {
  const v = env['POSTERN_AGENT_SOCKET'];
  return v !== undefined && v !== '' ? v : fromConfig();
}

export class Aborted extends Error {}

// What the path is when it exists and is not a socket (a directory, a
// file): then no daemon can be listening there, whatever runs.
function notASocket(path: string): string | null {
  try {
    const st = statSync(path);
    if (st.isSocket()) return null;
    return st.isDirectory() ? 'a directory' : st.isFile() ? 'a regular file' : 'not a socket';
  } catch {
    return null;
  }
}

export function agentCall(
  socketPath: string,
  method: string,
  path: string,
  body?: unknown,
  opts: AgentCallOptions = {},
): Promise<AgentReply> {
  return new Promise((resolve, reject) => {
    if (opts.signal?.aborted) {
      reject(new Aborted('the call was cancelled before it was sent'));
      return;
    }
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const notice = opts.onWaiting ? { [WAITING_NOTICE.ask]: '1' } : {};
    const req = http.request(
      {
        socketPath,
        method,
        path,
        headers: {
          'content-type': 'application/json',
          ...notice,
          ...(payload ? { 'content-length': payload.length } : {}),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          try {
            resolve({
              status: res.statusCode ?? 0,
              json: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>,
            });
          } catch {
            reject(new Unreachable(`the agent socket ${socketPath} answered something that is not postern's JSON`));
          }
        });
        res.on('error', () => undefined);
        // The daemon gone in the middle of its reply: no 'end' and no
        // request error follow, and the call would wait for ever.
        res.on('close', () => {
          if (!res.complete && !opts.signal?.aborted)
            reject(
              new Unreachable(
                `the postern daemon at ${socketPath} closed the connection in the middle of its reply; the request may have been executed — check \`postern audit show\` before retrying, and start \`postern daemon\` if it is not running`,
                true,
              ),
            );
        });
      },
    );
    req.on('information', (info) => {
      if (info.statusCode === 102) opts.onHeard?.();
      const id = info.headers[WAITING_NOTICE.id];
      const expires = info.headers[WAITING_NOTICE.expires];
      if (info.statusCode === 102 && typeof id === 'string' && typeof expires === 'string')
        opts.onWaiting?.({ id, expiresAt: expires, approved: info.headers[WAITING_NOTICE.decision] === 'approved' });
    });
    const onAbort = (): void => {
      req.destroy();
      reject(new Aborted('the call was cancelled'));
    };
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    req.on('close', () => opts.signal?.removeEventListener('abort', onAbort));
    req.on('error', (e: NodeJS.ErrnoException) => {
      if (opts.signal?.aborted) return;
      // Only these mean the daemon never had the request.
      if (['ENOENT', 'ECONNREFUSED', 'EACCES', 'EPERM', 'ENOTSOCK', 'ENOTDIR'].includes(e.code ?? '')) {
        const what = notASocket(socketPath);
        reject(
          new Unreachable(
            what
              ? `${socketPath} is ${what}, not the daemon's agent socket; check POSTERN_AGENT_SOCKET (or daemon.agent_socket in the config)`
              : `the postern daemon is not reachable at ${socketPath} (${e.code}); start it with \`postern daemon\``,
          ),
        );
      } else {
        reject(
          new Unreachable(
            `the postern daemon at ${socketPath} closed the connection before answering (${e.code ?? e.message}); the request may have been executed — check \`postern audit show\` before retrying, and start \`postern daemon\` if it is not running`,
            true,
          ),
        );
      }
    });
    req.end(payload);
  });
}
