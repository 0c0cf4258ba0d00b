// The CA bundle CMD's clients trust (SPEC §11): the system roots plus
// postern's CA (`<home>/ca.pem`), written to a private directory that is
// removed when `postern run` ends.
import {
  closeSync,
  constants,
  existsSync,
  fstatSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';

const SYSTEM_BUNDLE = '/etc/ssl/certs/ca-certificates.crt';

export interface CaBundle {
  file: string;
  // A wgetrc naming the bundle (wget, built on GnuTLS, reads none of the CA
  // variables): the caller's own wgetrc first, so its settings hold.
  wgetrc: string;
  // Whether postern's CA is in it (false: ca.pem is missing).
  withPosternCa: boolean;
  remove(): void;
}

function systemRoots(): string {
  try {
    return readFileSync(SYSTEM_BUNDLE, 'utf8');
  } catch {
    return tls.rootCertificates.join('\n');
  }
}

function readOptional(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}

// The most of a caller's wgetrc kept (a wgetrc is a few lines).
const MAX_WGETRC = 1 << 20;

// The wgetrc wget would read without postern ($WGETRC, else .wgetrc in
// $HOME or, HOME unset, in the passwd entry's home, as wget looks), byte
// for byte; nothing when it is missing or no regular file of at most
// MAX_WGETRC (opened without blocking: a FIFO would hang the run).
function callersWgetrc(env: NodeJS.ProcessEnv): Buffer {
  const home = env['HOME'] ?? passwdHome();
  const path = env['WGETRC'] || (home ? join(home, '.wgetrc') : null);
  if (!path) return Buffer.alloc(0);
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  } catch {
    return Buffer.alloc(0);
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile() || st.size > MAX_WGETRC) {
      process.stderr.write(
        `postern: warning: ${path} is not a regular file of at most 1 MiB; wget runs without it under \`postern run\`\n`,
      );
      return Buffer.alloc(0);
    }
    const text = readFileSync(fd);
    return text.length === 0 || text[text.length - 1] === 0x0a ? text : Buffer.concat([text, Buffer.from('\n')]);
  } catch {
    return Buffer.alloc(0);
  } finally {
    closeSync(fd);
  }
}

function passwdHome(): string | null {
  try {
    return userInfo().homedir || null;
  } catch {
    return null; // no passwd entry for this uid
  }
}

export function writeCaBundle(caPem: string, env: NodeJS.ProcessEnv = {}): CaBundle {
  const dir = mkdtempSync(join(tmpdir(), 'postern-run-')); // mode 0700
  const file = join(dir, 'ca-bundle.pem');
  const ours = existsSync(caPem) ? readOptional(caPem) : null;
  const roots = systemRoots();
  const parts = [roots.endsWith('\n') ? roots : `${roots}\n`, ...(ours !== null ? [ours] : [])];
  writeFileSync(file, parts.join(''), { mode: 0o600 });
  const wgetrc = join(dir, 'wgetrc');
  writeFileSync(wgetrc, Buffer.concat([callersWgetrc(env), Buffer.from(`ca_certificate = ${file}\n`)]), {
    mode: 0o600,
  });
  return { file, wgetrc, withPosternCa: ours !== null, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
