// The environment CMD starts with (SPEC §11): the caller's, plus the
// credentials' placeholders, then the proxy and CA variables over them (a
// placeholder variable never replaces one of these). SSH_AUTH_SOCK names
// the daemon's ssh-agent front door (SPEC §12) when it is on; when it is
// off, the caller's is left as it is.
import { ENV_NAME, refusedEnvName } from '../../shared/credential/env-names';

export const PROXY_VARIABLES = ['HTTPS_PROXY', 'HTTP_PROXY', 'https_proxy', 'http_proxy'] as const;
export const NO_PROXY_VARIABLES = ['NO_PROXY', 'no_proxy'] as const;
export const CA_VARIABLES = [
  'SSL_CERT_FILE',
  'CURL_CA_BUNDLE',
  'NODE_EXTRA_CA_CERTS',
  'REQUESTS_CA_BUNDLE',
  'GIT_SSL_CAINFO',
  'AWS_CA_BUNDLE',
  'PIP_CERT',
  'NPM_CONFIG_CAFILE',
] as const;

export interface ChildEnvInput {
  base: NodeJS.ProcessEnv;
  proxyUrl: string;
  bundle: string;
  wgetrc: string;
  placeholders: Record<string, string>;
  sshAgentSocket: string | null;
}

export function childEnvironment(i: ChildEnvInput): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...i.base, ...i.placeholders };
  for (const name of PROXY_VARIABLES) env[name] = i.proxyUrl;
  for (const name of NO_PROXY_VARIABLES) env[name] = '';
  for (const name of CA_VARIABLES) env[name] = i.bundle;
  env['WGETRC'] = i.wgetrc;
  env['NODE_USE_ENV_PROXY'] = '1';
  if (i.sshAgentSocket !== null) env['SSH_AUTH_SOCK'] = i.sshAgentSocket;
  return env;
}

// The variables a placeholder may not take over: the daemon's own rule
// for a credential's `env` (those `postern run` sets itself, and those that
// change what CMD runs, loads or trusts), checked again here so that no
// reply can reach them.
export function reservedVariable(name: string): boolean {
  return !ENV_NAME.test(name) || refusedEnvName(name) !== null;
}
