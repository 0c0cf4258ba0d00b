// `POST /v1/runs` (SPEC §11): the daemon opens a run for this process and
// answers a placeholder per credential and the variables to set to them.
import { agentCall } from '../agent-client';
import { DaemonRefusal, Unreachable } from '../errors';
import { inReaderWords } from '../../shared/reader-words';
import { reservedVariable } from './child-env';

export interface OpenedRun {
  run: string;
  env: Record<string, string>;
  // The daemon's ssh-agent socket (null: off); undefined when the daemon
  // did not say (the config's is used then).
  sshAgentSocket: string | null | undefined;
  // Variables two credentials name: each goes to the first (by name).
  conflicts: { variable: string; credential: string; ignored: string[] }[];
}

const VARIABLE = /^[A-Z_][A-Z0-9_]*$/;

function badReply(socket: string, what: string): Unreachable {
  return new Unreachable(`the agent socket ${socket} answered POST /v1/runs without ${what}; is it postern's daemon?`);
}

export async function openRun(socket: string, credentials: string[]): Promise<OpenedRun> {
  const r = await agentCall(socket, 'POST', '/v1/runs', credentials.length ? { credentials } : {});
  if (r.status !== 200) {
    const { code, message, ...detail } = (r.json['error'] ?? {}) as Record<string, unknown>;
    const said = inReaderWords(String(message), 'cli');
    throw new DaemonRefusal(String(code), `${String(code)}: ${said}`, { ...detail, message: said });
  }
  const run = r.json['run'];
  const env = r.json['env'];
  if (typeof run !== 'string' || run === '') throw badReply(socket, 'a run id');
  if (env === null || typeof env !== 'object' || Array.isArray(env)) throw badReply(socket, 'an env object');
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(env as Record<string, unknown>)) {
    // The daemon checks names when a credential is defined; a reserved
    // name in a reply is refused all the same.
    if (!VARIABLE.test(name) || reservedVariable(name) || typeof value !== 'string')
      throw badReply(socket, `a usable env entry (${JSON.stringify(name)})`);
    out[name] = value;
  }
  const agent = r.json['ssh_agent_socket'];
  if (agent !== undefined && agent !== null && (typeof agent !== 'string' || !agent.startsWith('/')))
    throw badReply(socket, 'a usable ssh_agent_socket (an absolute path or null)');
  const conflicts: OpenedRun['conflicts'] = [];
  const said = r.json['conflicts'];
  for (const c of Array.isArray(said) ? (said as unknown[]) : []) {
    const { variable, credential, ignored } = (c ?? {}) as Record<string, unknown>;
    if (typeof variable === 'string' && typeof credential === 'string' && Array.isArray(ignored))
      conflicts.push({ variable, credential, ignored: ignored.filter((n): n is string => typeof n === 'string') });
  }
  return { run, env: out, sshAgentSocket: agent as string | null | undefined, conflicts };
}
