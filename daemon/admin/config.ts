// `postern config diff` and `config approve`, and what the running daemon
// takes of an approved config.
import { Refusal } from '../../shared/errors';
import { Config, LoadedConfig, diffCanonical } from '../../shared/config';
import { changeLines, describeChanges } from '../../shared/config-changes';
import type { VaultHeader } from '../../shared/vault-format';
import { canonicalJson } from '../../shared/canonical-json';
import { lockedBecause } from '../lock-cause';
import type { UnlockedVault } from '../vault/unlocked-vault';
import type { AdminContext } from './context';
import { openWithPassphrase, prove, readHeader } from './proof';

type DaemonSettings = Config['daemon'];

// Settings that name files or sockets the running daemon already holds; a
// change to them needs a restart rather than a reload.
const RESTART_KEYS = [
  'home',
  'agent_socket',
  'admin_socket',
  'vault',
  'audit_log',
  'agent_socket_mode',
  'agent_socket_group',
  'log_level',
  'log_format',
] as const satisfies readonly (keyof DaemonSettings)[];
const RESTART_PATHS: readonly string[] = RESTART_KEYS.map((k) => `daemon.${k}`);

function keepRunning<K extends keyof DaemonSettings>(into: DaemonSettings, running: DaemonSettings, key: K): void {
  into[key] = running[key];
}

// What the running daemon takes of `fresh`: everything but the settings
// that cannot change while it runs (sockets, home, vault and journal
// paths, log level), which keep their running values until the next start
// and are named in `waiting`. The hash and canonical form are fresh's: it
// is the approved config.
export function adoptable(running: LoadedConfig, fresh: LoadedConfig): { config: LoadedConfig; waiting: string[] } {
  const waiting = diffCanonical(running.canonical, fresh.canonical)
    .map((c) => c.path)
    .filter((p) => RESTART_PATHS.includes(p));
  if (waiting.length === 0) return { config: fresh, waiting };
  const daemon = { ...fresh.config.daemon };
  for (const key of RESTART_KEYS)
    if (waiting.includes(`daemon.${key}`)) keepRunning(daemon, running.config.daemon, key);
  const config = { ...fresh.config, daemon };
  return { config: { ...fresh, config, home: running.home, paths: running.paths }, waiting };
}

function sameBytes(a: Buffer | null, b: Buffer | null): boolean {
  return a === b || (a !== null && b !== null && a.equals(b));
}

// Installs an adopted config. Connections made under another CA list or
// other DNS servers are retired, so a removed CA is never trusted again.
export function install(ctx: AdminContext, next: LoadedConfig): void {
  const before = ctx.config;
  ctx.config = next;
  const ca = !sameBytes(before.caFileContents, next.caFileContents);
  const dns = canonicalJson(before.config.http.dns_servers) !== canonicalJson(next.config.http.dns_servers);
  if (ca || dns) ctx.trustChanges.emit({ ca, dns });
}

// The refusal for a config that differs from the one the vault approved.
export function configMismatch(header: VaultHeader, fresh: LoadedConfig): Refusal | null {
  if (header.approvedConfig === fresh.canonical) return null;
  const changes = diffCanonical(header.approvedConfig, fresh.canonical);
  // Only settings added since the approval, at their defaults: the same config.
  if (changes.length === 0) return null;
  return new Refusal(
    'config_not_approved',
    `the config changed since it was approved (${describeChanges(changes)}); review it and run \`postern config approve\`, then \`postern unlock\``,
    { changes },
  );
}

export function configDiff(ctx: AdminContext): Record<string, unknown> {
  const current = ctx.reloadConfig();
  const { header } = readHeader(ctx.config.paths.vault);
  const changes = diffCanonical(header.approvedConfig, current.canonical);
  return {
    config_path: current.configPath,
    current_hash: current.hash,
    approved: changes.length === 0,
    changes,
    lines: changeLines(changes),
    summary: describeChanges(changes),
  };
}

// Approve the config now on disk. `expectedHash` is what the human was
// shown, so a file changed between showing and approving is not approved.
export async function configApprove(
  ctx: AdminContext,
  passphrase: Buffer,
  expectedHash: string,
): Promise<Record<string, unknown>> {
  const current = ctx.reloadConfig();
  if (current.hash !== expectedHash) {
    throw new Refusal('conflict', 'the config changed while it was being reviewed; run `postern config approve` again');
  }
  const approve = (vault: UnlockedVault): Promise<void> =>
    ctx.writes.write(vault, { kind: 'config_approve', config_hash: current.hash }, () => undefined, {
      approvedConfig: current.canonical,
    });
  // On an unlocked daemon the approved config takes effect at once, in
  // full, except what waits for the next start (named in the reply).
  let waiting: string[] = [];
  if (!ctx.state.locked) {
    const vault = await prove(ctx, passphrase);
    const adopted = adoptable(ctx.config, current);
    await approve(vault);
    install(ctx, adopted.config);
    waiting = adopted.waiting;
    ctx.timers.armAutoLock();
  } else {
    const opened = await openWithPassphrase(ctx, passphrase);
    try {
      await approve(opened);
    } finally {
      opened.wipe();
    }
    // What kept the daemon locked is lifted; the vault itself is not open.
    if (ctx.state.cause.refusal.code === 'config_not_approved')
      ctx.state.cause = lockedBecause('the config was approved; waiting for `postern unlock`');
    waiting = adoptable(ctx.config, current).waiting;
  }
  return {
    approved_hash: current.hash,
    locked: ctx.state.locked,
    applied: ctx.state.locked ? 'at unlock' : 'now',
    restart_required: waiting,
  };
}
