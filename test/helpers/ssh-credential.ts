// SSH credentials for tests against a real sshd: the definition as TOML,
// added through the real CLI, and the shape of a successful reply.
import type { Home, Result } from './postern';
import { cli } from './postern';

// The reply is the agent protocol's own type.
export type { SshReply } from '../../shared/protocol';

export interface SshCredSpec {
  name: string;
  host?: string; // default 127.0.0.1
  port: number;
  user: string;
  auth?: 'key' | 'password'; // default key
  hostKey: string;
  commands: string[];
  stdin?: boolean;
  approve?: 'session' | 'each-use';
  allow?: string[]; // allow_addresses; default 127.0.0.1/32
}

export function sshDefinition(c: SshCredSpec): string {
  const list = (xs: string[]): string => `[${xs.map((x) => JSON.stringify(x)).join(', ')}]`;
  return [
    `name = ${JSON.stringify(c.name)}`,
    'kind = "ssh"',
    `host = ${JSON.stringify(c.host ?? '127.0.0.1')}`,
    `port = ${c.port}`,
    `user = ${JSON.stringify(c.user)}`,
    `auth = "${c.auth ?? 'key'}"`,
    `host_key = ${JSON.stringify(c.hostKey)}`,
    `commands = ${list(c.commands)}`,
    `stdin = ${c.stdin ?? false}`,
    ...(c.approve ? [`approve = "${c.approve}"`] : []),
    `allow_addresses = ${list(c.allow ?? ['127.0.0.1/32'])}`,
    '',
  ].join('\n');
}

// `postern cred add` with the definition, the secret from a file and, for
// an encrypted key, its passphrase.
export function addSshCredential(
  h: Pick<Home, 'env' | 'file' | 'passFile'>,
  c: SshCredSpec,
  secretFile: string,
  keyPassphrase?: string,
): Result {
  const args = [
    'cred',
    'add',
    '--file',
    h.file(`${c.name}.toml`, sshDefinition(c)),
    '--secret-file',
    secretFile,
    '--passphrase-file',
    h.passFile,
  ];
  if (keyPassphrase !== undefined)
    args.push('--key-passphrase-file', h.file(`${c.name}.keypass`, keyPassphrase + '\n'));
  return cli(h, args);
}
