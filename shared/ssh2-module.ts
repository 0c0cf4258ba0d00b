// ssh2, loaded the first time an SSH key is read or a connection made
// rather than with every process that imports a module which may need it:
// it holds ~8 MiB resident (its ciphers, the asn1 and bcrypt modules), which
// a daemon serving only HTTP, and every CLI command, would carry for nothing.
import type * as Ssh2 from 'ssh2';

export function ssh2(): typeof Ssh2 {
  return require('ssh2') as typeof Ssh2;
}
