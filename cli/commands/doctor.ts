// doctor: check the environment and say what to fix. Read-only.
import { Command } from 'commander';
import { lstatSync } from 'node:fs';
import { Context } from '../context';
import { doctorEnvironmentFindings } from '../../shared/hardening';
import { diffCanonical } from '../../shared/config';
import { describeChanges } from '../../shared/config-changes';
import { describeError } from '../errors';
import { describeDaemon, findRunningDaemon, RunningDaemon, restartAdvice } from '../../shared/running-daemon';
import { dirname } from 'node:path';
import { MIN_FREE_BYTES, MIN_FREE_FRACTION, formatBytes, journalFreeSpace } from './journal-usage';

type Ctx = () => Context;

export interface Finding {
  level: 'ok' | 'warn' | 'fail';
  what: string;
  fix?: string;
}

// `running`: the daemon running for this home, if any; a socket missing
// under a running daemon is a daemon nobody can reach.
function fileFinding(
  label: string,
  path: string,
  mode: number,
  kind: 'dir' | 'file' | 'socket',
  running: RunningDaemon | null = null,
): Finding {
  let st;
  try {
    st = lstatSync(path);
  } catch {
    if (kind === 'socket' && running)
      return {
        level: 'fail',
        what: `${label} ${path} does not exist, but the daemon (${describeDaemon(running)}) is running`,
        fix: restartAdvice(running),
      };
    return kind === 'socket'
      ? { level: 'warn', what: `${label} ${path} does not exist`, fix: 'start the daemon: `postern daemon`' }
      : { level: 'fail', what: `${label} ${path} does not exist`, fix: 'run `postern init`' };
  }
  if (st.isSymbolicLink())
    return { level: 'fail', what: `${label} ${path} is a symlink`, fix: 'replace it with a real file or directory' };
  const actual = st.mode & 0o777;
  if (actual & ~mode & 0o777) {
    return {
      level: 'fail',
      what: `${label} ${path} has mode ${actual.toString(8).padStart(4, '0')}`,
      fix: `chmod ${mode.toString(8).padStart(4, '0')} ${path}`,
    };
  }
  return { level: 'ok', what: `${label} ${path} (mode ${actual.toString(8).padStart(4, '0')})` };
}

// The journal's filesystem nearly full (SPEC §9): below 1 GiB or 5 % free.
// When the journal cannot take an entry, every request is refused.
function journalSpaceFinding(path: string): Finding {
  let f;
  try {
    f = journalFreeSpace(path);
  } catch (e) {
    return { level: 'warn', what: `journal filesystem: cannot tell how much space is free (${describeError(e)})` };
  }
  const what = `journal filesystem (${dirname(path)}): ${formatBytes(f.free)} free of ${formatBytes(f.total)}`;
  if (!f.nearlyFull) return { level: 'ok', what };
  return {
    level: 'warn',
    what: `${what}, nearly full (less than ${formatBytes(MIN_FREE_BYTES)} or ${MIN_FREE_FRACTION * 100} %)`,
    fix: 'free space there, or move daemon.audit_log to a larger filesystem; when the journal cannot be written every request is refused (`postern status` shows its growth over the last hour)',
  };
}

export function register(program: Command, ctx: Ctx): void {
  program
    .command('doctor')
    .description(
      "check the environment: modes, symlinks, ptrace scope, core dumps, swap, forbidden variables, Node version, config approval, space for the journal, the daemon's pid when its sockets are missing",
    )
    .action(async () => {
      const c = ctx();
      const { parseHeader, readVaultFile } =
        require('../../shared/vault-format') as typeof import('../../shared/vault-format');
      const findings: Finding[] = [...doctorEnvironmentFindings()];
      try {
        const config = c.config();
        const d = config.config.daemon;
        findings.push(fileFinding('home', config.home, 0o700, 'dir'));
        findings.push(fileFinding('config', config.configPath, 0o600, 'file'));
        findings.push(fileFinding('vault', config.paths.vault, 0o600, 'file'));
        const running = await findRunningDaemon(config.home);
        findings.push(fileFinding('admin socket', config.paths.adminSocket, 0o600, 'socket', running));
        findings.push(fileFinding('agent socket', config.paths.agentSocket, d.agent_socket_mode, 'socket', running));
        if (config.paths.sshAgentSocket !== null)
          findings.push(
            fileFinding('ssh-agent socket', config.paths.sshAgentSocket, d.agent_socket_mode, 'socket', running),
          );
        findings.push(journalSpaceFinding(config.paths.auditLog));
        try {
          const { header } = parseHeader(readVaultFile(config.paths.vault));
          const changes = diffCanonical(header.approvedConfig, config.canonical);
          findings.push(
            changes.length === 0
              ? { level: 'ok', what: `config approved (${config.hash})` }
              : {
                  level: 'fail',
                  what: `config changed since approval: ${describeChanges(changes)}`,
                  fix: 'review it, then `postern config approve`',
                },
          );
        } catch (e) {
          findings.push({ level: 'fail', what: `vault: ${describeError(e)}` });
        }
      } catch (e) {
        findings.push({ level: 'fail', what: `config: ${describeError(e)}` });
      }
      const worst = findings.some((f) => f.level === 'fail')
        ? 'fail'
        : findings.some((f) => f.level === 'warn')
          ? 'warn'
          : 'ok';
      c.out(
        { result: worst, findings },
        findings.map((f) => `[${f.level}] ${f.what}${f.fix ? ` — ${f.fix}` : ''}`),
      );
      if (worst === 'fail') process.exitCode = 1;
    });
}
