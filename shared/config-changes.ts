// How a config differs from the approved one, in the words of the file
// (SPEC §3): durations and sizes in their units ("2m", "1MiB"), a changed CA
// bundle certificate by certificate (subject and SHA-256 fingerprint). The
// daemon's config_not_approved refusal, `postern config approve` and
// `postern doctor` all say it this way. Values (which an agent may have
// written) never render control, bidi or zero-width characters.
import { canonicalJson } from './canonical-json';
import type { CaCertificate } from './ca-list';
import { ConfigChange, settingUnit } from './config';
import { escapeInvisible, formatDuration, formatSize } from './units';

function showValue(settingPath: string, v: unknown): string {
  if (v === undefined) return '(absent)';
  const unit = settingUnit(settingPath);
  if (typeof v === 'number' && unit === 'duration') return formatDuration(v);
  if (typeof v === 'number' && unit === 'size') return formatSize(v);
  return escapeInvisible(canonicalJson(v));
}

function certificateList(v: unknown): CaCertificate[] {
  if (!Array.isArray(v)) return [];
  return v.filter(
    (c): c is CaCertificate =>
      typeof c === 'object' && c !== null && typeof c.subject === 'string' && typeof c.sha256 === 'string',
  );
}

function showCertificates(list: readonly CaCertificate[]): string {
  return list
    .map((c) => `${escapeInvisible(JSON.stringify(c.subject))} (SHA-256 ${escapeInvisible(c.sha256)})`)
    .join(', ');
}

// A record approved before certificates were listed, with the same file,
// is no change at all (diffCanonical); with another file, every certificate
// of the new one is "added".
function certificatesLine(c: ConfigChange): string {
  const before = certificateList(c.from);
  const after = certificateList(c.to);
  const had = new Set(before.map((x) => x.sha256));
  const has = new Set(after.map((x) => x.sha256));
  const added = after.filter((x) => !had.has(x.sha256));
  const removed = before.filter((x) => !has.has(x.sha256));
  const parts = [
    ...(added.length ? [`added ${showCertificates(added)}`] : []),
    ...(removed.length ? [`removed ${showCertificates(removed)}`] : []),
  ];
  const same =
    after.length > 0 ? 'the same ones, in another order' : 'the record changed but names no readable certificate';
  return `http.ca_file certificates: ${parts.length ? parts.join('; ') : same}`;
}

function contentsLine(c: ConfigChange): string {
  if (c.from === '' || c.from === undefined) return 'http.ca_file contents added';
  if (c.to === '' || c.to === undefined) return 'http.ca_file contents removed';
  return 'http.ca_file contents changed (the same certificates)';
}

// One line per change; a changed CA bundle is said once, by its certificates.
export function changeLines(changes: readonly ConfigChange[]): string[] {
  const certificates = changes.some((c) => c.path === 'http.ca_certificates');
  return changes.flatMap((c) => {
    if (c.path === 'http.ca_file_sha256') return certificates ? [] : [contentsLine(c)];
    if (c.path === 'http.ca_certificates') return [certificatesLine(c)];
    return [`${escapeInvisible(c.path)}: ${showValue(c.path, c.from)} → ${showValue(c.path, c.to)}`];
  });
}

export function describeChanges(changes: readonly ConfigChange[]): string {
  return changes.length === 0 ? 'no changes' : changeLines(changes).join('; ');
}
