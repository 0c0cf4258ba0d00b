// The canonical form of an effective config, whose hash the vault pins.
import { createHash } from 'node:crypto';
import { canonicalJson, CanonicalValue } from './canonical-json';
import { caCertificates } from './ca-list';
import { Config, TABLES } from './config-types';
import { ROWS } from './config-settings';

// Every key with its effective value, plus the CA file's hash, so that a
// changed CA bundle changes the config hash although the path did not change,
// and its certificates (only when there are some, so that records approved
// before they were listed still match a config without a CA file).
export function canonicalConfig(config: Config, caFileContents: Buffer | null): string {
  const out: Record<string, Record<string, CanonicalValue>> = Object.fromEntries(TABLES.map((name) => [name, {}]));
  for (const row of ROWS) {
    (out[row.table] as Record<string, CanonicalValue>)[row.key] = row.kind.canonical(
      (config[row.table] as Record<string, unknown>)[row.key],
    );
  }
  (out.http as Record<string, CanonicalValue>).ca_file_sha256 = caFileContents
    ? createHash('sha256').update(caFileContents).digest('hex')
    : '';
  const certificates = caFileContents ? caCertificates(caFileContents) : [];
  if (certificates.length > 0)
    (out.http as Record<string, CanonicalValue>).ca_certificates = certificates.map((c) => ({ ...c }));
  return canonicalJson(out);
}

export function configHash(canonical: string): string {
  return `sha256:${createHash('sha256').update(canonical, 'utf8').digest('hex')}`;
}
