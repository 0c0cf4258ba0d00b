// The settings table (SPEC §3): every key of the config with its default, its
// kind and the reason it exists, in the order the SPEC lists them. The
// schema, the defaults, the canonical form and the config texts are derived
// from it.
import { ConfigPath, Kind, Setting, TableName, TomlDefault, ValueAt } from './config-types';
import {
  concurrency,
  daemonUid,
  dnsServers,
  duration,
  group,
  leafValidity,
  logFormat,
  logLevel,
  mcpResultSize,
  otherHosts,
  pathKind,
  segmentSize,
  size,
  socketMode,
  uidList,
} from './config-kinds';

function setting<P extends ConfigPath>(
  settingPath: P,
  def: TomlDefault,
  kind: Kind<ValueAt<P>>,
  reason: string,
): Setting<P> {
  const [table, key] = settingPath.split('.') as [TableName, string];
  return { path: settingPath, table, key, default: def, kind, reason };
}

// In the order of SPEC §3. `home`'s default is documentation: when the key is
// absent, home comes from POSTERN_HOME, else ~/.postern.
export const SETTINGS = [
  setting(
    'daemon.home',
    '~/.postern',
    pathKind('home'),
    'where postern keeps its files; unset: POSTERN_HOME, else ~/.postern',
  ),
  setting(
    'daemon.agent_socket',
    'agent.sock',
    pathKind('file'),
    'agents connect here (HTTP over a Unix socket); relative to home, or absolute',
  ),
  setting(
    'daemon.admin_socket',
    'admin.sock',
    pathKind('file'),
    "the CLI and the approver connect here; only the daemon's own uid",
  ),
  setting(
    'daemon.vault',
    'vault',
    pathKind('file'),
    'the encrypted vault: credentials, policies, audit keys, approved config hash',
  ),
  setting('daemon.audit_log', 'audit.log', pathKind('file'), 'the append-only audit journal'),
  setting(
    'daemon.audit_segment_size',
    '64MiB',
    segmentSize,
    'the journal moves on to a new segment file (audit.log.1, .2, ...) past this size',
  ),
  setting(
    'daemon.log_level',
    'info',
    logLevel,
    'pino level (trace, debug, info, warn, error, fatal, silent); logs go to stderr',
  ),
  setting('daemon.log_format', 'auto', logFormat, '"json", "pretty", or "auto": pretty on a terminal, else JSON'),
  setting('daemon.auto_lock', '8h', duration, 'lock after this long without an agent request'),
  setting('daemon.unlock_max', '24h', duration, 'lock after this long unlocked, whatever the traffic'),
  setting('daemon.approval_timeout', '120s', duration, 'how long a request waits for a decision'),
  setting(
    'daemon.max_pending',
    32,
    concurrency,
    'requests waiting for approval, all processes together (at most 16 per process); beyond: 429 busy',
  ),
  setting('daemon.session_ttl', '8h', duration, 'longest life of an approved session'),
  setting('daemon.agent_uids', [], uidList, "uids allowed on the agent socket; empty: the daemon's own"),
  setting(
    'daemon.agent_socket_mode',
    '0600',
    socketMode,
    '"0660" with agent_socket_group when agents run as another user',
  ),
  setting(
    'daemon.agent_socket_group',
    '',
    group,
    'group (name or gid) given the agent socket; empty: leave it as created',
  ),
  setting('daemon.daemon_uid', -1, daemonUid, "the uid the CLI requires of admin.sock's peer; -1: its own"),
  setting(
    'daemon.agent_request_timeout',
    '10s',
    duration,
    'an agent must send a whole request (headers and body) within this; slower ones are refused',
  ),
  setting('http.timeout', '30s', duration, 'per request (approval wait excluded), unless timeout_ms is set'),
  setting('http.max_timeout', '10m', duration, 'the largest timeout_ms a request may set'),
  setting('http.max_request_body', '1MiB', size, 'larger request bodies are refused: 413 body_too_large'),
  setting('http.max_response_body', '8MiB', size, 'larger responses are truncated and flagged'),
  setting('http.max_concurrent', 64, concurrency, 'requests in flight beyond this: 429 busy'),
  setting('http.dns_servers', [], dnsServers, 'empty: system resolver; e.g. ["127.0.0.1:5353"]'),
  setting(
    'http.ca_file',
    '',
    pathKind('optional-file'),
    "extra PEM roots, added to Node's bundled roots; relative to home, or absolute",
  ),
  setting('ssh.timeout', '30s', duration, 'per command (approval wait excluded), unless timeout_ms is set'),
  setting('ssh.max_output', '8MiB', size, 'stdout+stderr together'),
  setting(
    'ssh.connection_idle',
    '10s',
    duration,
    'an SSH connection is kept this long after its last command, for reuse by the same credential',
  ),
  setting(
    'ssh.ssh_agent_socket',
    'ssh-agent.sock',
    pathKind('optional-file'),
    'the ssh-agent front door (SSH_AUTH_SOCK for ssh and git); relative to home, or absolute; "" turns it off',
  ),
  setting(
    'proxy.other_hosts',
    'tunnel',
    otherHosts,
    'CONNECT to a host no credential covers: "tunnel" (relay bytes, address rules still apply) or "refuse"',
  ),
  setting(
    'proxy.leaf_validity',
    '24h',
    leafValidity,
    'lifetime of the leaf certificates the local CA signs (from 1h to 30d)',
  ),
  setting(
    'audit.refusal_burst',
    20,
    concurrency,
    'refusals journaled in full per second per process; beyond: summarised',
  ),
  setting(
    'mcp.max_result',
    '1MiB',
    mcpResultSize,
    'the largest tool result `postern mcp` returns; a larger body is cut and flagged truncated',
  ),
] as const;

// Compile-time proof that every key of Config has a row.
type Listed = (typeof SETTINGS)[number]['path'];
type AssertNever<T extends never> = T;
export type _EverySettingListed = AssertNever<Exclude<ConfigPath, Listed>>;

export type AnySetting = Setting<ConfigPath> & { kind: Kind<unknown> };
export const ROWS: readonly AnySetting[] = SETTINGS;
export const HOME_ROW = ROWS.find((r) => r.kind.path === 'home') as AnySetting;

// How a person reads a setting's value, if not as it is stored.
export function settingUnit(settingPath: string): 'duration' | 'size' | undefined {
  return ROWS.find((r) => r.path === settingPath)?.kind.unit;
}
