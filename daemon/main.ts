// Start-up and shutdown of the daemon, in order: hardening, addon, config,
// home, vault presence, one-daemon-per-home, sockets; then wait. It starts
// locked. SIGTERM/SIGINT/SIGHUP lock (wiping keys), close the sockets and exit 0.
import net from 'node:net';
import http from 'node:http';
import { Refusal } from '../shared/errors';
import { harden } from '../shared/hardening';
import { loadNative } from '../shared/native';
import { loadConfig } from '../shared/config';
import { parseHeader, readVaultFile } from '../shared/vault-format';
import { removeStaleTemps } from '../shared/durable-write';
import { sodiumReady } from '../shared/crypto';
import { basename, dirname } from 'node:path';
import { createLogger } from './logger';
import { checkHome } from './home-check';
import { claimHome, listenUnix, removeSocket } from './sockets';
import { capConnections, connectionBudget } from './connection-budget';
import { openFileLimit } from '../shared/open-file-limit';
import { limitHeldProcesses } from './identity/identify';
import { Controller } from './controller';
import { createAdminServer } from './admin-server';
import { createAgentServer, identify, journalAgentRefusal } from './agent-server';
import { createSshAgentServer } from './ssh-agent/server';
import { createPipelineServices } from './request-services';
import { Journal } from './audit/journal';
import { answerUnanswered } from './exchanges-open';
import { refuseResponse } from './proxy/refusal-response';
import { limitHeapGrowth } from './heap-growth';

// How long a stopping daemon waits for the requests in flight to be
// answered (the lock ends each at once: this bounds a defect, not a wait).
const STOP_DRAIN_MS = 5_000;

// The answer of a request the stop overtook before it was answered (its
// body still arriving, or a wait the lock does not end): nothing of it is
// journaled after the daemon's stop.
const STOPPED = new Refusal(
  'vault_locked',
  'the daemon stopped before this request was answered; start it (and unlock it), then check whether the request ran before sending it again',
);

export interface DaemonOptions {
  configFlag: string | undefined;
  env: NodeJS.ProcessEnv;
}

export interface RunningDaemon {
  stop(reason: string): Promise<void>;
}

// `armed` is called with the running daemon just before it says it is
// ready (daemon_ready): whoever runs it installs its signal handling there,
// so a SIGTERM sent on seeing that line always finds a handler.
export async function startDaemon(
  opts: DaemonOptions,
  armed: (d: RunningDaemon) => void = () => undefined,
): Promise<RunningDaemon> {
  harden('daemon');
  loadNative();
  process.umask(0o077);
  const config = loadConfig({ configFlag: opts.configFlag, env: opts.env });
  const log = createLogger(config.config.daemon.log_level, config.config.daemon.log_format);
  checkHome(config.home);
  // A missing or unreadable vault is reported now rather than at unlock; a
  // temp file left by a write that was cut short is removed.
  parseHeader(readVaultFile(config.paths.vault));
  removeStaleTemps(dirname(config.paths.vault), basename(config.paths.vault));
  await sodiumReady();

  const lock = await claimHome(config.home);
  let journal: Journal;
  try {
    journal = await Journal.open({ path: config.paths.auditLog, segmentSize: config.config.daemon.audit_segment_size });
  } catch (e) {
    lock.close();
    throw e;
  }
  const controller = new Controller({ config, configFlag: opts.configFlag, env: opts.env, log, journal });
  try {
    await controller.record({ kind: 'daemon_start', pid: process.pid, config_hash: config.hash });
  } catch (e) {
    await journal.close().catch(() => undefined);
    lock.close();
    throw e;
  }
  const admin = createAdminServer(controller, log);
  const services = createPipelineServices(controller);
  const agent = createAgentServer(controller, log, services);
  const d = config.config.daemon;
  const budget = connectionBudget(openFileLimit() ?? 1024);
  limitHeldProcesses(budget.heldProcesses);
  capConnections(agent, budget.agentConnections, 'agent socket', log);
  const opened: { server: net.Server | http.Server; path: string }[] = [];
  try {
    await listenUnix(admin, config.paths.adminSocket, 0o600);
    opened.push({ server: admin, path: config.paths.adminSocket });
    await listenUnix(agent, config.paths.agentSocket, d.agent_socket_mode, d.agent_socket_group || undefined);
    opened.push({ server: agent, path: config.paths.agentSocket });
    // The ssh-agent front door (SPEC §12), under the agent socket's access rules.
    const sshAgentPath = config.paths.sshAgentSocket;
    if (sshAgentPath !== null) {
      const sshAgent = createSshAgentServer({
        pipeline: services,
        identify: (sock) => identify(controller, sock),
        journalUnidentified: (sock, r, endpoint) => journalAgentRefusal(services, sock, r, endpoint),
        requireUnlocked: () => void controller.requireUnlocked(),
        touch: () => controller.touch(),
        log,
      });
      capConnections(sshAgent, budget.sshAgentConnections, 'ssh-agent socket', log);
      await listenUnix(sshAgent, sshAgentPath, d.agent_socket_mode, d.agent_socket_group || undefined);
      opened.push({ server: sshAgent, path: sshAgentPath });
    }
  } catch (e) {
    for (const o of opened) {
      o.server.close();
      removeSocket(o.path);
    }
    await journal.close().catch(() => undefined);
    lock.close();
    throw e;
  }

  // A listening socket whose accept fails emits 'error' (ENOBUFS, ENOMEM;
  // running out of descriptors libuv handles itself, closing what waits);
  // unheard, it would end the daemon. One line, and it goes on listening.
  for (const o of opened)
    o.server.on('error', (e: NodeJS.ErrnoException) =>
      log.warn(
        { event: 'accept_failed', socket: o.path, code: e.code ?? null },
        `a connection to ${o.path} could not be accepted (${e.code ?? e.message}); continuing`,
      ),
    );

  let stopping: Promise<void> | null = null;
  const stop = (reason: string): Promise<void> => {
    stopping ??= (async () => {
      for (const o of opened) {
        removeSocket(o.path);
        o.server.close();
        if ('closeIdleConnections' in o.server) o.server.closeIdleConnections();
      }
      // Summaries of refusals still counting are journaled before the stop.
      await services.refusals.flushAll();
      // The lock refuses what is in flight; those answers go out, their
      // outcomes journaled, before the connections and the journal close.
      await controller.shutdown(reason, () => services.stores.inFlight.settled(STOP_DRAIN_MS));
      answerUnanswered((res) => refuseResponse(res, STOPPED));
      for (const o of opened) if ('closeAllConnections' in o.server) o.server.closeAllConnections();
      lock.close();
    })();
    return stopping;
  };
  const running: RunningDaemon = { stop };
  armed(running);
  log.info(
    {
      event: 'daemon_ready',
      home: config.home,
      agent_socket: config.paths.agentSocket,
      ssh_agent_socket: config.paths.sshAgentSocket,
    },
    'daemon started, locked',
  );
  return running;
}

// `postern daemon`: run in the foreground until a signal.
export async function runDaemon(opts: DaemonOptions): Promise<void> {
  limitHeapGrowth();
  const onSignals = (daemon: RunningDaemon): void => {
    const onSignal = (sig: string): void => {
      void daemon.stop(sig).then(() => process.exit(0));
    };
    process.on('SIGTERM', () => onSignal('SIGTERM'));
    process.on('SIGINT', () => onSignal('SIGINT'));
    // The terminal it runs in was closed (or kill -HUP): the same orderly
    // stop, so the journal ends with daemon_stop and a checkpoint rather
    // than an unsigned tail. Not a reload: the config is re-read at unlock.
    process.on('SIGHUP', () => onSignal('SIGHUP'));
  };
  try {
    await startDaemon(opts, onSignals);
  } catch (e) {
    const msg = e instanceof Refusal ? e.message : `could not start: ${(e as Error).message}`;
    // Hardening refusals already begin with "postern daemon refuses to run".
    process.stderr.write(msg.startsWith('postern ') ? `${msg}\n` : `postern daemon: ${msg}\n`);
    process.exit(1);
  }
}
