// Loading the config: the file's values checked against the table, home and
// paths resolved, the checks across keys, the CA file read, then the
// effective config with its canonical form and hash.
import * as path from 'node:path';
import { Problem, Refusal } from './errors';
import { quoteValue } from './units';
import { Config, LoadedConfig, TABLES } from './config-types';
import { AnySetting, HOME_ROW, ROWS } from './config-settings';
import { badConfig, CONFIG_SCHEMA, fileRefusal, isTable, issueProblems, rowSchema } from './config-validate';
import { expandTilde, Locations, resolveLocations, samePlace } from './config-locations';
import { parseTomlText, readCaFile, readConfigFile } from './config-files';
import { CROSS_CHECKS, Values } from './config-cross-checks';
import { canonicalConfig, configHash } from './config-canonical';

function rawValue(raw: Record<string, unknown>, row: AnySetting): unknown {
  const table = raw[row.table];
  return isTable(table) ? table[row.key] : undefined;
}

// Every row's value that is valid on its own, so the checks that depend on
// values can still run (and report) when other keys are wrong.
function validRowValues(raw: Record<string, unknown>): Values {
  const values: Values = new Map();
  for (const row of ROWS) {
    const r = rowSchema(row).safeParse(rawValue(raw, row));
    if (r.success && r.data !== undefined) values.set(row.path, r.data);
  }
  return values;
}

function evaluate(loc: Locations, raw: Record<string, unknown>, exists: boolean): LoadedConfig {
  const problems: Problem[] = [];
  const parsed = CONFIG_SCHEMA.safeParse(raw);
  let values: Values;
  if (parsed.success) {
    values = new Map();
    for (const row of ROWS) {
      const v = parsed.data[row.table]?.[row.key];
      if (v !== undefined) values.set(row.path, v);
    }
  } else {
    for (const issue of parsed.error.issues) problems.push(...issueProblems(issue, raw));
    values = validRowValues(raw);
  }

  // Home: the config's, else POSTERN_HOME, else ~/.postern. A config found
  // in one home that names another is ambiguous: which home was meant?
  const written = values.get('daemon.home');
  let home = loc.homeFromEnvOrDefault;
  if (typeof written === 'string') {
    home = path.resolve(expandTilde(written));
    if (!loc.configExplicit && !samePlace(home, loc.homeFromEnvOrDefault)) {
      problems.push({
        path: 'daemon.home',
        message:
          `names ${quoteValue(home)}, but this config was found in the home ${quoteValue(loc.homeFromEnvOrDefault)} ` +
          '(POSTERN_HOME, else ~/.postern); remove daemon.home from the config, or pass --config FILE to use it with the home it names',
      });
    }
  }
  // An invalid written home is already reported; relative paths cannot be
  // placed without it, so the checks that need them are skipped.
  const homeKnown = typeof written === 'string' || rawValue(raw, HOME_ROW) === undefined;
  if (homeKnown) values.set('daemon.home', home);
  for (const row of ROWS) {
    if (row.kind.path !== 'file' && row.kind.path !== 'optional-file') continue;
    const v = values.get(row.path);
    if (!homeKnown) values.delete(row.path);
    else if (typeof v === 'string' && v !== '') values.set(row.path, path.resolve(home, expandTilde(v)));
  }

  for (const check of CROSS_CHECKS) {
    if (check.needs.every((p) => values.has(p))) problems.push(...check.problems(values));
  }

  let caFileContents: Buffer | null = null;
  const caFile = values.get('http.ca_file');
  if (typeof caFile === 'string' && caFile !== '') {
    const r = readCaFile(caFile);
    if (r.ok) caFileContents = r.value;
    else problems.push({ path: 'http.ca_file', message: r.message });
  }

  if (problems.length > 0) throw badConfig(loc.configPath, problems);

  const tables: Record<string, Record<string, unknown>> = Object.fromEntries(TABLES.map((name) => [name, {}]));
  for (const row of ROWS) (tables[row.table] as Record<string, unknown>)[row.key] = values.get(row.path);
  const config = tables as unknown as Config;
  const canonical = canonicalConfig(config, caFileContents);
  return {
    config,
    configPath: loc.configPath,
    home: config.daemon.home,
    paths: {
      agentSocket: config.daemon.agent_socket,
      sshAgentSocket: config.ssh.ssh_agent_socket === '' ? null : config.ssh.ssh_agent_socket,
      adminSocket: config.daemon.admin_socket,
      vault: config.daemon.vault,
      auditLog: config.daemon.audit_log,
      caPem: path.join(config.daemon.home, 'ca.pem'),
    },
    canonical,
    hash: configHash(canonical),
    caFileContents,
    exists,
  };
}

export function loadConfig(
  opts: { configFlag?: string; env?: NodeJS.ProcessEnv; allowMissing?: boolean } = {},
): LoadedConfig {
  const loc = resolveLocations({ configFlag: opts.configFlag, env: opts.env ?? process.env });
  const text = readConfigFile(loc.configPath);
  if (text === null) {
    if (!opts.allowMissing) {
      throw fileRefusal(
        loc.configPath,
        'no config file here; run `postern init` to create one, or pass --config FILE (or set POSTERN_CONFIG)',
      );
    }
    return evaluate(loc, {}, false);
  }
  return evaluate(loc, parseTomlText(loc.configPath, text), true);
}

// The effective config when no file sets anything, for a given home.
export function defaultConfig(home: string): Config {
  return evaluate(
    { configPath: '(defaults)', homeFromEnvOrDefault: path.resolve(home), configExplicit: false },
    {},
    false,
  ).config;
}

// For the commands that stop or inspect the running daemon (lock, session
// revocation, status): the settings the file still gives that are valid on
// their own, the rest defaulted. The config is agent-writable in the
// same-user deployment (SPEC §1); a file it broke must not take away the
// human's way to stop the daemon. None of these commands sends a
// passphrase or a secret, and the admin socket's peer is still checked.
// `problem`: why the file did not load as it is, for a warning; null when
// it loaded.
export function loadConfigLeniently(opts: { configFlag?: string; env?: NodeJS.ProcessEnv } = {}): {
  loaded: LoadedConfig;
  problem: string | null;
} {
  try {
    return { loaded: loadConfig(opts), problem: null };
  } catch (e) {
    if (!(e instanceof Refusal) || e.code !== 'bad_config') throw e;
    const loc = resolveLocations({ configFlag: opts.configFlag, env: opts.env ?? process.env });
    // A file that cannot be read (another user's, in the dedicated-user
    // deployment) or a --config that names nothing says so as before:
    // defaults would point at another home. What is lenient is a file
    // read whose content does not load, or the home's own config missing.
    let text: string | null;
    try {
      text = readConfigFile(loc.configPath);
    } catch {
      throw e;
    }
    if (text === null && loc.configExplicit) throw e;
    let raw: Record<string, unknown> = {};
    try {
      raw = text === null ? {} : parseTomlText(loc.configPath, text);
    } catch {
      // not TOML at all: every setting defaulted
    }
    const kept: Record<string, Record<string, unknown>> = {};
    for (const row of ROWS) {
      const v = rawValue(raw, row);
      if (v !== undefined && rowSchema(row).safeParse(v).success) (kept[row.table] ??= {})[row.key] = v;
    }
    let loaded: LoadedConfig;
    try {
      loaded = evaluate(loc, kept, text !== null);
    } catch {
      // the valid settings disagree with each other: all defaulted
      loaded = evaluate(loc, {}, text !== null);
    }
    return { loaded, problem: e.message };
  }
}
