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

export function writeCaBundle(caPem: string): CaBundle {
  const dir = mkdtempSync(join(tmpdir(), 'postern-run-')); // mode 0700
  const file = join(dir, 'ca-bundle.pem');
  const ours = existsSync(caPem) ? readOptional(caPem) : null;
  const roots = systemRoots();
  const parts = [roots.endsWith('\n') ? roots : `${roots}\n`, ...(ours !== null ? [ours] : [])];
  writeFileSync(file, parts.join(''), { mode: 0o600 });
  return { file, withPosternCa: ours !== null, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
