// The daemon's settings file (SPEC §3). One table, SETTINGS, lists every key
// with its default, its parser and the reason it exists; the zod schema, the
// defaults, the canonical form (whose hash the vault pins) and the text of
// executor.example.toml and of `postern init`'s config are all derived from it.
// The code lives in shared/config-*.ts, one job per file; this is the one
// import for users.
export { LOG_LEVELS, LOG_FORMATS, OTHER_HOSTS, TABLES } from './config-types';
export type { LogLevel, LogFormat, OtherHosts, Config, LoadedConfig, ConfigPath, Setting } from './config-types';
export { MIN_AUDIT_SEGMENT_BYTES, formatMode } from './config-kinds';
export { parseDnsServer, formatDnsServer } from './config-dns';
export type { DnsServer } from './config-dns';
export { SETTINGS, settingUnit } from './config-settings';
export type { _EverySettingListed } from './config-settings';
export { expandTilde, resolveLocations } from './config-locations';
export { loadConfig, loadConfigLeniently, defaultConfig } from './config-load';
export { canonicalConfig, configHash } from './config-canonical';
export { diffCanonical } from './config-diff';
export type { ConfigChange } from './config-diff';
export { exampleConfigText, initialConfigText } from './config-text';
