// doctor: check the environment and say what to fix. Read-only.
import { Command } from 'commander';
import { lstatSync } from 'node:fs';
import { Context } from '../context';
import { doctorEnvironmentFindings } from '../../shared/hardening';
import { describeChanges, diffCanonical } from '../../shared/config';
import { describeError } from '../errors';

type Ctx = () => Context;

export interface Finding {
  level: 'ok' | 'warn' | 'fail';
  what: string;
  fix?: string;
}

function fileFinding(label: string, path: string, mode: number, kind: 'dir' | 'file' | 'socket'): Finding {
  let st;
  try {
    st = lstatSync(path);
  } catch {
    return kind === 'socket'
      ? { level: 'warn', what: `${label} ${path} does not exist`, fix: 'start the daemon: `postern daemon`' }
      : { level: 'fail', what: `${label} ${path} does not exist`, fix: 'run `postern init`' };
  }
  if (st.isSymbolicLink()) return { level: 'fail', what: `${label} ${path} is a symlink`, fix: 'replace it with a real file or directory' };
  const actual = st.mode & 0o777;
  if (actual & ~mode & 0o777) {
    return { level: 'fail', what: `${label} ${path} has mode ${actual.toString(8).padStart(4, '0')}`, fix: `chmod ${mode.toString(8).padStart(4, '0')} ${path}` };
  }
  return { level: 'ok', what: `${label} ${path} (mode ${actual.toString(8).padStart(4, '0')})` };
}

export function register(program: Command, ctx: Ctx): void {
  program
    .command('doctor')
    .description('check the environment: modes, symlinks, ptrace scope, core dumps, swap, forbidden variables, Node version, config approval')
    .action(() => {
      const c = ctx();
      const { parseHeader, readVaultFile } = require('../../shared/vault-format') as typeof import('../../shared/vault-format');
      const findings: Finding[] = [...doctorEnvironmentFindings()];
      try {
        const config = c.config();
        const d = config.config.daemon;
        findings.push(fileFinding('home', config.home, 0o700, 'dir'));
        findings.push(fileFinding('config', config.configPath, 0o600, 'file'));
        findings.push(fileFinding('vault', config.paths.vault, 0o600, 'file'));
        findings.push(fileFinding('admin socket', config.paths.adminSocket, 0o600, 'socket'));
        findings.push(fileFinding('agent socket', config.paths.agentSocket, d.agent_socket_mode, 'socket'));
        try {
          const { header } = parseHeader(readVaultFile(config.paths.vault));
          const changes = diffCanonical(header.approvedConfig, config.canonical);
          findings.push(changes.length === 0
            ? { level: 'ok', what: `config approved (${config.hash})` }
            : { level: 'fail', what: `config changed since approval: ${describeChanges(changes)}`, fix: 'review it, then `postern config approve`' });
        } catch (e) {
          findings.push({ level: 'fail', what: `vault: ${describeError(e)}` });
        }
      } catch (e) {
        findings.push({ level: 'fail', what: `config: ${describeError(e)}` });
      }
      const worst = findings.some((f) => f.level === 'fail') ? 'fail' : findings.some((f) => f.level === 'warn') ? 'warn' : 'ok';
      c.out({ result: worst, findings }, findings.map((f) => `[${f.level}] ${f.what}${f.fix ? ` — ${f.fix}` : ''}`));
      if (worst === 'fail') process.exitCode = 1;
    });
}
