// `env` of an HTTP credential (SPEC §4, §11): the environment variables
// `postern run` sets to the credential's placeholder. A placeholder is
// worthless outside its run, but the variable it lands in is not: one that
// `postern run` sets itself would be overwritten or would break the proxy,
// and one a program reads as code, a search path or a trust setting would
// let a definition change what runs. Those names are refused, each with
// why.
import { FORBIDDEN_ENV_REASONS, NEUTRALISED_ENV_REASONS } from '../hardening';
import { Check, ok, bad, quote } from './text';

export const ENV_NAME = /^[A-Z_][A-Z0-9_]*$/;
export const ENV_MAX = 16;
const ENV_NAME_MAX = 128;

const RUN_SETS = '`postern run` sets it itself';
const CODE = 'a program reads it as code to run or a place to load code from';
const LOOKUP = 'it changes where programs, files or names are looked up';

// Exact names, with the reason each is refused.
const REFUSED_NAMES: Readonly<Record<string, string>> = {
  // What the daemon refuses or neutralises in its own environment (a
  // reason below replaces its own).
  ...Object.fromEntries(
    Object.entries({ ...FORBIDDEN_ENV_REASONS, ...NEUTRALISED_ENV_REASONS }).filter(([k]) => ENV_NAME.test(k)),
  ),
  // What `postern run` sets for CMD (SPEC §11).
  HTTPS_PROXY: RUN_SETS,
  HTTP_PROXY: RUN_SETS,
  NO_PROXY: RUN_SETS,
  SSL_CERT_FILE: RUN_SETS,
  CURL_CA_BUNDLE: RUN_SETS,
  NODE_EXTRA_CA_CERTS: RUN_SETS,
  REQUESTS_CA_BUNDLE: RUN_SETS,
  GIT_SSL_CAINFO: RUN_SETS,
  AWS_CA_BUNDLE: RUN_SETS,
  PIP_CERT: RUN_SETS,
  NPM_CONFIG_CAFILE: RUN_SETS,
  WGETRC: RUN_SETS,
  NODE_USE_ENV_PROXY: RUN_SETS,
  SSH_AUTH_SOCK: RUN_SETS,
  // What the shell and common runtimes read as code or search paths.
  PATH: LOOKUP,
  HOME: LOOKUP,
  PWD: LOOKUP,
  CDPATH: LOOKUP,
  TMPDIR: LOOKUP,
  SHELL: CODE,
  IFS: 'the shell splits words with it',
  ENV: CODE,
  BASH_ENV: CODE,
  PROMPT_COMMAND: CODE,
  EDITOR: CODE,
  VISUAL: CODE,
  PAGER: CODE,
  GCONV_PATH: CODE,
  LOCPATH: LOOKUP,
  NLSPATH: LOOKUP,
  NODE_PATH: CODE,
  PERL5LIB: CODE,
  PERL5OPT: CODE,
  PERLLIB: CODE,
  RUBYOPT: CODE,
  RUBYLIB: CODE,
  GIT_SSH: CODE,
  GIT_SSH_COMMAND: CODE,
  GIT_ASKPASS: CODE,
  SSH_ASKPASS: CODE,
  GIT_EXEC_PATH: CODE,
  GIT_PROXY_COMMAND: CODE,
  GIT_CONFIG: CODE,
  GIT_SSL_NO_VERIFY: 'it disables certificate checks',
  GIT_SSL_CAPATH: 'it changes which certificate authorities are trusted',
  SSL_CERT_DIR: 'it changes which certificate authorities are trusted',
  RES_OPTIONS: LOOKUP,
  LOCALDOMAIN: LOOKUP,
  // Commands git, man, less, browsers' openers, sudo and cargo run, and
  // files npm and node load: a placeholder is a bare word, looked up on
  // PATH or opened in the current directory, so whoever can put a file of
  // that name there would have it run.
  GIT_SEQUENCE_EDITOR: CODE,
  GIT_EXTERNAL_DIFF: CODE,
  MANPAGER: CODE,
  LESSOPEN: CODE,
  LESSCLOSE: CODE,
  BROWSER: CODE,
  NPM_CONFIG_USERCONFIG: CODE,
  NPM_CONFIG_GLOBALCONFIG: CODE,
  NPM_CONFIG_SCRIPT_SHELL: CODE,
  NPM_CONFIG_SHELL: CODE,
  NODE_REPL_EXTERNAL_MODULE: CODE,
};

// Families of names, by prefix or suffix.
const REFUSED_PREFIXES: readonly [string, string][] = [
  ['LD_', 'the dynamic loader reads it (libraries loaded into every program)'],
  ['DYLD_', 'the dynamic loader reads it (libraries loaded into every program)'],
  ['PYTHON', 'Python reads it at start-up (code, paths or interpreter options)'],
  ['GIT_CONFIG_', 'git reads it as configuration, which can name programs to run'],
  ['BASH_FUNC_', 'bash imports it as a function'],
  ['POSTERN_', "it is postern's own setting"],
];
const REFUSED_SUFFIXES: readonly [string, string][] = [
  ['_PROXY', 'it is a proxy setting, and `postern run` sets the proxy'],
  ['_PAGER', CODE],
  ['_EDITOR', CODE],
  ['ASKPASS', CODE],
  ['_WRAPPER', CODE],
  ['_OPTIONS', 'a runtime reads it as command-line options (JAVA_TOOL_OPTIONS: -javaagent loads code)'],
];

// Why `name` may not be a credential's variable; null when it may.
export function refusedEnvName(name: string): string | null {
  const exact = Object.prototype.hasOwnProperty.call(REFUSED_NAMES, name) ? REFUSED_NAMES[name] : undefined;
  if (exact !== undefined) return exact;
  for (const [prefix, why] of REFUSED_PREFIXES) if (name.startsWith(prefix)) return why;
  for (const [suffix, why] of REFUSED_SUFFIXES) if (name.endsWith(suffix)) return why;
  return null;
}

export function checkEnvName(name: string): Check<string> {
  if (name === '') return bad('is empty; name the variable a program reads the token from, e.g. "GH_TOKEN"');
  if (name.length > ENV_NAME_MAX) return bad(`is longer than ${ENV_NAME_MAX} characters`);
  if (!ENV_NAME.test(name)) {
    return bad(
      `${quote(name)} is not an env variable name: upper-case letters, digits and "_", not starting with a digit, e.g. "GH_TOKEN"`,
    );
  }
  const why = refusedEnvName(name);
  if (why !== null)
    return bad(`${name} cannot be set to a placeholder: ${why}; name the variable the program reads its token from`);
  return ok(name);
}
