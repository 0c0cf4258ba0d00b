// Where the config and home are: --config, POSTERN_CONFIG, POSTERN_HOME,
// else ~/.postern.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

export interface Locations {
  configPath: string;
  homeFromEnvOrDefault: string;
  configExplicit: boolean;
}

export function expandTilde(p: string): string {
  if (p === '~') return os.homedir();
  if (p.startsWith('~/')) return path.join(os.homedir(), p.slice(2));
  return p;
}

function fromEnv(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v === '' ? undefined : v;
}

export function resolveLocations(opts: { configFlag?: string; env: NodeJS.ProcessEnv }): Locations {
  const envHome = fromEnv(opts.env, 'POSTERN_HOME');
  const homeFromEnvOrDefault = path.resolve(
    envHome !== undefined ? expandTilde(envHome) : path.join(os.homedir(), '.postern'),
  );
  const explicit =
    opts.configFlag !== undefined && opts.configFlag !== '' ? opts.configFlag : fromEnv(opts.env, 'POSTERN_CONFIG');
  if (explicit !== undefined)
    return { configPath: path.resolve(expandTilde(explicit)), homeFromEnvOrDefault, configExplicit: true };
  return { configPath: path.join(homeFromEnvOrDefault, 'config.toml'), homeFromEnvOrDefault, configExplicit: false };
}

export function samePlace(a: string, b: string): boolean {
  if (path.resolve(a) === path.resolve(b)) return true;
  try {
    return fs.realpathSync(a) === fs.realpathSync(b);
  } catch {
    return false;
  }
}
