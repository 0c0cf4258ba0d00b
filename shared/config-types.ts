// The shapes of the daemon's settings (SPEC §3): the effective config, what
// loading it yields, and the row type of the settings table.
import { z } from 'zod';
import { CanonicalValue } from './canonical-json';

export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
export const LOG_FORMATS = ['auto', 'json', 'pretty'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];
// What the proxy front door does with a CONNECT to a host no credential
// covers (SPEC §11).
export const OTHER_HOSTS = ['tunnel', 'refuse'] as const;
export type OtherHosts = (typeof OTHER_HOSTS)[number];

// Effective values: durations in ms, sizes in bytes, paths absolute
// (resolved against home), ca_file "" when unset.
export interface Config {
  daemon: {
    home: string;
    agent_socket: string;
    admin_socket: string;
    vault: string;
    audit_log: string;
    audit_segment_size: number;
    log_level: LogLevel;
    log_format: LogFormat;
    auto_lock: number;
    unlock_max: number;
    approval_timeout: number;
    max_pending: number;
    session_ttl: number;
    agent_uids: number[];
    agent_socket_mode: number;
    agent_socket_group: string;
    daemon_uid: number;
    agent_request_timeout: number;
  };
  http: {
    timeout: number;
    max_timeout: number;
    max_request_body: number;
    max_response_body: number;
    max_concurrent: number;
    dns_servers: string[];
    ca_file: string;
  };
  ssh: {
    timeout: number;
    max_output: number;
    connection_idle: number;
    ssh_agent_socket: string;
  };
  proxy: {
    other_hosts: OtherHosts;
    leaf_validity: number;
  };
  audit: {
    refusal_burst: number;
  };
  mcp: {
    max_result: number;
  };
}

export interface LoadedConfig {
  config: Config;
  configPath: string;
  home: string;
  paths: {
    agentSocket: string;
    // null: the ssh-agent front door is off (ssh.ssh_agent_socket = "").
    sshAgentSocket: string | null;
    adminSocket: string;
    vault: string;
    auditLog: string;
    // The proxy front door's CA certificate (public), always in home.
    caPem: string;
  };
  canonical: string;
  hash: string;
  caFileContents: Buffer | null;
  exists: boolean;
}

export type TableName = keyof Config;
export const TABLES: readonly TableName[] = ['daemon', 'http', 'ssh', 'proxy', 'audit', 'mcp'];
export type ConfigPath = { [T in TableName]: `${T}.${keyof Config[T] & string}` }[TableName];
export type ValueAt<P extends ConfigPath> = P extends `${infer T extends TableName}.${infer K}`
  ? K extends keyof Config[T]
    ? Config[T][K]
    : never
  : never;

// How a path-valued setting is resolved once home is known.
export type PathRole = 'home' | 'file' | 'optional-file';

export interface Kind<T> {
  // Raw TOML value → checked value (paths still as written).
  schema: z.ZodType<T>;
  // The effective value as it appears in the canonical form.
  canonical(value: T): CanonicalValue;
  path?: PathRole;
  // How a person reads the value (config-changes.ts shows it so).
  unit?: 'duration' | 'size';
}

export type TomlDefault = string | number | readonly never[];

export interface Setting<P extends ConfigPath = ConfigPath> {
  path: P;
  table: TableName;
  key: string;
  default: TomlDefault;
  kind: Kind<ValueAt<P>>;
  reason: string;
}

// One value checked: the value, or the message saying what is wrong.
export type Check<T> = { ok: true; value: T } | { ok: false; message: string };
