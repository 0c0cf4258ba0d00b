// Normalised credential definitions (SPEC §4): every default filled in,
// plain JSON-able objects with keys in the order definitionToToml prints.
// They never hold a secret.

export type Approve = 'session' | 'each-use';
export type HttpScheme = 'http' | 'https';
export type SshAuth = 'key' | 'password';

// AWS Signature Version 4 (SPEC §13): postern signs each request.
export interface AwsSigV4Inject {
  region: string;
  service: string;
}

// A GitHub App installation token (SPEC §13), obtained and cached by postern.
export interface GithubAppInject {
  app_id: number;
  installation_id: number;
  api: string; // https, without a trailing "/"
  repositories?: string[]; // narrowing; absent: what the installation has
  permissions?: Record<string, string>; // narrowing; absent: likewise
}

// An OAuth 2.0 access token (SPEC §13), obtained and cached by postern.
export interface OAuth2Inject {
  token_url: string;
  client_id: string;
  grant: 'client_credentials' | 'refresh_token';
  scopes?: string[];
  client_auth: 'basic' | 'post';
}

// Exactly one injection form, with the TOML key names.
export type HttpInject =
  | { header: string; template: string } // header lower-cased
  | { basic_user: string }
  | { query: string }
  | { aws_sigv4: AwsSigV4Inject }
  | { github_app: GithubAppInject }
  | { oauth2: OAuth2Inject };

export type InjectForm = 'header' | 'basic' | 'query' | 'aws_sigv4' | 'github_app' | 'oauth2';

export interface HttpAllowRule {
  host: string; // normalised; exact, "*.example.com", IPv4, or "[IPv6]"
  schemes: HttpScheme[];
  ports: number[]; // any scheme × any port of the rule
  methods: string[]; // upper case
  paths: string[];
  approve: Approve; // effective: never weaker than the credential's
}

export interface HttpCredentialDef {
  name: string;
  description: string;
  kind: 'http';
  approve: Approve;
  redact_response: boolean;
  pass_set_cookie: boolean;
  rate?: string; // normalised "N/sec|min|hour|day"; absent: no budget
  allow_addresses: string[]; // normalised CIDRs
  env?: string[]; // variables `postern run` sets to the placeholder (SPEC §11); absent: none
  headers?: Record<string, string>; // lower-cased names, in the order written; absent: none
  inject: HttpInject;
  allow: HttpAllowRule[];
}

export interface SshCredentialDef {
  name: string;
  description: string;
  kind: 'ssh';
  host: string; // normalised; IPv6 without brackets
  port: number;
  user: string;
  auth: SshAuth;
  host_key: string; // "SHA256:<43 base64>"
  commands: string[];
  stdin: boolean;
  approve: Approve;
  allow_addresses: string[];
  // Offered through the ssh-agent front door (SPEC §12); absent when false,
  // so definitions made before it keep their hash.
  ssh_agent?: true;
}

export type CredentialDef = HttpCredentialDef | SshCredentialDef;

// Key order of each table, used to print, diff and rebuild definitions.
export const HTTP_KEYS = [
  'name',
  'description',
  'kind',
  'approve',
  'redact_response',
  'pass_set_cookie',
  'rate',
  'allow_addresses',
  'env',
  'headers',
  'inject',
  'allow',
] as const;
export const INJECT_KEYS = ['header', 'template', 'basic_user', 'query', 'aws_sigv4', 'github_app', 'oauth2'] as const;
export const OAUTH2_KEYS = ['token_url', 'client_id', 'grant', 'scopes', 'client_auth'] as const;
export const AWS_SIGV4_KEYS = ['region', 'service'] as const;
export const GITHUB_APP_KEYS = ['app_id', 'installation_id', 'api', 'repositories', 'permissions'] as const;
export const ALLOW_RULE_KEYS = ['host', 'schemes', 'ports', 'methods', 'paths', 'approve'] as const;
export const SSH_KEYS = [
  'name',
  'description',
  'kind',
  'host',
  'port',
  'user',
  'auth',
  'host_key',
  'commands',
  'stdin',
  'approve',
  'allow_addresses',
  'ssh_agent',
] as const;

export const APPROVE_STRICTNESS: Readonly<Record<Approve, number>> = { session: 0, 'each-use': 1 };

export function stricterApprove(a: Approve, b: Approve): Approve {
  return APPROVE_STRICTNESS[a] >= APPROVE_STRICTNESS[b] ? a : b;
}

export function injectForm(inject: HttpInject): InjectForm {
  if ('header' in inject) return 'header';
  if ('basic_user' in inject) return 'basic';
  if ('aws_sigv4' in inject) return 'aws_sigv4';
  if ('github_app' in inject) return 'github_app';
  if ('oauth2' in inject) return 'oauth2';
  return 'query';
}
