// The CA bundle CMD's clients trust (SPEC §11): the system roots plus
// postern's CA (`<home>/ca.pem`), written to a private directory that is
// removed when `postern run` ends.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
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

// The wgetrc wget would read without postern: $WGETRC, else ~/.wgetrc.
function callersWgetrc(env: NodeJS.ProcessEnv): string {
  const path = env['WGETRC'] || (env['HOME'] ? join(env['HOME'], '.wgetrc') : null);
  const text = path ? readOptional(path) : null;
  return text === null ? '' : text.endsWith('\n') ? text : `${text}\n`;
}

export function writeCaBundle(caPem: string, env: NodeJS.ProcessEnv = {}): CaBundle {
  const dir = mkdtempSync(join(tmpdir(), 'postern-run-')); // mode 0700
  const file = join(dir, 'ca-bundle.pem');
  const ours = existsSync(caPem) ? readOptional(caPem) : null;
  const roots = systemRoots();
  const parts = [roots.endsWith('\n') ? roots : `${roots}\n`, ...(ours !== null ? [ours] : [])];
  writeFileSync(file, parts.join(''), { mode: 0o600 });
  const wgetrc = join(dir, 'wgetrc');
  writeFileSync(wgetrc, `${callersWgetrc(env)}ca_certificate = ${file}\n`, { mode: 0o600 });
  return { file, wgetrc, withPosternCa: ours !== null, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
