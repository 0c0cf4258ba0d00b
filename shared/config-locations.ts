// Where the config and home are: --config, POSTERN_CONFIG, POSTERN_HOME,
// else ~/.postern.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Refusal } from './errors';

export interface Locations {
  configPath: string;
  homeFromEnvOrDefault: string;
  configExplicit: boolean;
}

// The user's home directory: HOME, else the password database. An empty or
// relative HOME would put postern's home under whatever directory the
// command runs in: refused, naming the variable.
function userHome(): string {
  const home = os.homedir();
  if (!path.isAbsolute(home))
    throw new Refusal(
      'bad_request',
      `HOME is ${home === '' ? 'empty' : `${JSON.stringify(home)}, not an absolute path`}, so ~/.postern would be relative to the current directory; set HOME to your home directory, or POSTERN_HOME to postern's home`,
    );
  return home;
}

export function expandTilde(p: string): string {
  if (p === '~') return userHome();
  if (p.startsWith('~/')) return path.join(userHome(), p.slice(2));
  return p;
}

function fromEnv(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v === '' ? undefined : v;
}

export function resolveLocations(opts: { configFlag?: string; env: NodeJS.ProcessEnv }): Locations {
  const envHome = fromEnv(opts.env, 'POSTERN_HOME');
  const homeFromEnvOrDefault = path.resolve(
    envHome !== undefined ? expandTilde(envHome) : path.join(userHome(), '.postern'),
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
