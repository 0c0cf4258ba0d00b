// AWS Signature Version 4 (SPEC §13): postern signs each request of an
// `aws_sigv4` credential with the real keys, and through the proxy signs
// again a request an unmodified AWS client signed with a placeholder.
// Written from AWS's published description of the algorithm: a canonical
// request (method, path, query, headers, the signed header names, payload
// hash), a string to sign over its SHA-256 with the date and credential
// scope, and an HMAC-SHA256 under a key derived from the secret key by day,
// region and service.
//
// Decisions where AWS leaves a choice to the signer:
// - The path is signed as sent for s3 (AWS signs S3 paths encoded once,
//   unnormalised); for every other service `.`/`..`/empty segments are
//   resolved and each segment is URI-encoded once more, as AWS describes.
// - The query is read with RFC 3986 semantics: `%XX` is a byte, `+` is a
//   plus sign, a `%` not followed by two hex digits is itself, a name with
//   no `=` has an empty value, empty pairs (`&&`, a lone `?`) are nothing.
// - A header given more than once is signed as its values joined by `,`.
import { createHash, createHmac } from 'node:crypto';

export type { AwsKeys } from '../../../shared/credential/aws-secret';
import type { AwsKeys } from '../../../shared/credential/aws-secret';
export { parseAwsSecret } from '../../../shared/credential/aws-secret';

export interface SigV4Input {
  method: string;
  host: string; // the Host header value as sent (host, plus :port when not the scheme's default)
  path: string; // the path as it goes on the wire (already percent-encoded as the client sent it)
  query: string; // '' or '?a=b&c' as on the wire
  headers: [string, string][]; // every other header that will be sent (no host), names in any case
  // Hex SHA-256 of the body, 'UNSIGNED-PAYLOAD', or (re-signing) the
  // client's 'STREAMING-UNSIGNED-PAYLOAD-TRAILER', which signs no chunk.
  payloadHash: string;
  region: string;
  service: string;
  date: Date;
  // Proxy re-signing: the names the client signed. They are signed again
  // (those present among the headers), with host, x-amz-date and, when the
  // keys carry one, x-amz-security-token, which every SigV4 request signs.
  signedHeaders?: string[];
}

// The headers postern sets on a signed request; an agent may not send them.
export const SIGV4_HEADERS: readonly string[] = [
  'authorization',
  'x-amz-date',
  'x-amz-content-sha256',
  'x-amz-security-token',
];

const ALGORITHM = 'AWS4-HMAC-SHA256';
const SCOPE_END = 'aws4_request';

// -- canonical request -------------------------------------------------------

// RFC 3986 unreserved bytes stay; every other byte becomes %XX (upper case),
// except those `keep` names ('/' in a path).
function uriEncode(bytes: Buffer, keep = ''): string {
  let out = '';
  for (const b of bytes) {
    const c = String.fromCharCode(b);
    const unreserved =
      (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a) || (b >= 0x30 && b <= 0x39) || '-_.~'.includes(c);
    out += unreserved || keep.includes(c) ? c : `%${b.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

// `%XX` to its byte; any other character (a stray `%` too) to its UTF-8 bytes.
function percentDecode(text: string): Buffer {
  const bytes: Buffer[] = [];
  let plain = '';
  for (let i = 0; i < text.length; i++) {
    if (text[i] === '%' && /^[0-9A-Fa-f]{2}$/.test(text.slice(i + 1, i + 3))) {
      bytes.push(Buffer.from(plain, 'utf8'), Buffer.from([parseInt(text.slice(i + 1, i + 3), 16)]));
      plain = '';
      i += 2;
    } else plain += text[i];
  }
  bytes.push(Buffer.from(plain, 'utf8'));
  return Buffer.concat(bytes);
}

// Dot and empty segments resolved, as AWS normalises non-S3 paths; the
// trailing '/' kept when something remains.
function normalisedPath(path: string): string {
  const kept: string[] = [];
  for (const segment of path.split('/')) {
    if (segment === '' || segment === '.') continue;
    if (segment === '..') kept.pop();
    else kept.push(segment);
  }
  const trailing = kept.length > 0 && path.endsWith('/') ? '/' : '';
  return `${path.startsWith('/') ? '/' : ''}${kept.join('/')}${trailing}`;
}

function canonicalPath(path: string, service: string): string {
  if (path === '') return '/';
  if (service === 's3') return path;
  // The wire path is encoded once already; AWS signs it encoded again.
  return uriEncode(Buffer.from(normalisedPath(path), 'utf8'), '/');
}

function canonicalQuery(query: string): string {
  const pairs: [string, string][] = [];
  for (const piece of query.replace(/^\?/, '').split('&')) {
    if (piece === '') continue;
    const eq = piece.indexOf('=');
    const name = eq === -1 ? piece : piece.slice(0, eq);
    const value = eq === -1 ? '' : piece.slice(eq + 1);
    pairs.push([uriEncode(percentDecode(name)), uriEncode(percentDecode(value))]);
  }
  // Sorted by name, then value: code-unit order is byte order for ASCII.
  const order = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
  pairs.sort((a, b) => order(a[0], b[0]) || order(a[1], b[1]));
  return pairs.map(([n, v]) => `${n}=${v}`).join('&');
}

// Leading and trailing spaces trimmed, inner runs of spaces and tabs made one.
function canonicalValue(value: string): string {
  return value.replace(/[ \t]+/g, ' ').replace(/^ | $/g, '');
}

// Headers the AWS SDKs never sign, because proxies and clients add, change
// or drop them on the way (smithy's list, the JavaScript SDK's signer).
const UNSIGNABLE = new Set([
  'authorization',
  'cache-control',
  'connection',
  'expect',
  'from',
  'keep-alive',
  'max-forwards',
  'pragma',
  'referer',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'user-agent',
  'x-amzn-trace-id',
]);
const UNSIGNABLE_PREFIX = /^(proxy-|sec-)/;

function headerValues(input: SigV4Input, generated: Record<string, string>): Map<string, string[]> {
  const values = new Map<string, string[]>([['host', [input.host]]]);
  for (const [name, value] of input.headers) {
    const key = name.toLowerCase();
    // Host comes from input.host; postern's own headers replace any given.
    if (key === 'host' || SIGV4_HEADERS.includes(key)) continue;
    values.set(key, [...(values.get(key) ?? []), value]);
  }
  for (const [key, value] of Object.entries(generated)) if (key !== 'authorization') values.set(key, [value]);
  return values;
}

function namesToSign(values: Map<string, string[]>, input: SigV4Input, keys: AwsKeys): string[] {
  let names: string[];
  if (input.signedHeaders === undefined) {
    names = [...values.keys()].filter((n) => !UNSIGNABLE.has(n) && !UNSIGNABLE_PREFIX.test(n));
  } else {
    const wanted = new Set(input.signedHeaders.map((n) => n.toLowerCase()));
    wanted.add('host').add('x-amz-date');
    if (keys.sessionToken !== null) wanted.add('x-amz-security-token');
    names = [...values.keys()].filter((n) => wanted.has(n));
  }
  return names.sort();
}

// -- signature -------------------------------------------------------------

function hmac(key: Buffer, data: string): Buffer {
  return createHmac('sha256', key).update(data, 'utf8').digest();
}

// kSecret → kDate → kRegion → kService → kSigning, each step's key wiped.
function signatureOf(secretKey: Buffer, day: string, region: string, service: string, stringToSign: string): string {
  let key: Buffer = Buffer.concat([Buffer.from('AWS4', 'latin1'), secretKey]);
  for (const step of [day, region, service, SCOPE_END]) {
    const next = hmac(key, step);
    key.fill(0);
    key = next;
  }
  const signature = hmac(key, stringToSign).toString('hex');
  key.fill(0);
  return signature;
}

// 20150830T123600Z
function amzDate(date: Date): string {
  return date
    .toISOString()
    .replace(/\.\d{3}Z$/, 'Z')
    .replace(/[-:]/g, '');
}

// The headers to add (authorization, x-amz-date, x-amz-content-sha256, and
// x-amz-security-token when the keys have one), which names were signed, and
// the signature (in authorization).
export function signSigV4(
  input: SigV4Input,
  keys: AwsKeys,
): { headers: Record<string, string>; signedHeaders: string[]; signature: string } {
  const longDate = amzDate(input.date);
  const day = longDate.slice(0, 8);
  const scope = `${day}/${input.region}/${input.service}/${SCOPE_END}`;
  const headers: Record<string, string> = { 'x-amz-date': longDate, 'x-amz-content-sha256': input.payloadHash };
  if (keys.sessionToken !== null) headers['x-amz-security-token'] = keys.sessionToken;
  const values = headerValues(input, headers);
  const signed = namesToSign(values, input, keys);
  const canonicalHeaders = signed.map((n) => `${n}:${(values.get(n) ?? []).map(canonicalValue).join(',')}\n`);
  const canonicalRequest = [
    input.method,
    canonicalPath(input.path, input.service),
    canonicalQuery(input.query),
    canonicalHeaders.join(''),
    signed.join(';'),
    input.payloadHash,
  ].join('\n');
  const stringToSign = [
    ALGORITHM,
    longDate,
    scope,
    createHash('sha256').update(canonicalRequest, 'utf8').digest('hex'),
  ].join('\n');
  const signature = signatureOf(keys.secretAccessKey, day, input.region, input.service, stringToSign);
  headers['authorization'] =
    `${ALGORITHM} Credential=${keys.accessKeyId}/${scope}, SignedHeaders=${signed.join(';')}, Signature=${signature}`;
  return { headers, signedHeaders: signed, signature };
}

// -- what a client sent through the proxy --------------------------------

const SCOPE_PART = /^[A-Za-z0-9._-]{1,64}$/;
const HEADER_NAME = /^[a-z0-9!#$%&'*+.^_`|~-]+$/;

function parseCredential(value: string): { accessKeyId: string; date: string; region: string; service: string } | null {
  const parts = value.split('/');
  if (parts.length !== 5) return null;
  const [accessKeyId, date, region, service, end] = parts as [string, string, string, string, string];
  if (accessKeyId === '' || !/^\d{8}$/.test(date) || end !== SCOPE_END) return null;
  if (!SCOPE_PART.test(region) || !SCOPE_PART.test(service)) return null;
  return { accessKeyId, date, region, service };
}

function parseSignedHeaders(value: string): string[] | null {
  const names = value.split(';');
  if (!names.every((n) => HEADER_NAME.test(n)) || new Set(names).size !== names.length) return null;
  return names;
}

// The Authorization header an AWS client signed with (a placeholder as its
// access key id): `AWS4-HMAC-SHA256 Credential=ID/DAY/REGION/SERVICE/aws4_request,
// SignedHeaders=a;b, Signature=<64 hex>`, each field once, spaces allowed
// around the commas. null when it is another scheme or malformed.
function trimSpaceTab(v: string): string {
  let start = 0;
  let end = v.length;
  while (start < end && (v[start] === ' ' || v[start] === '\t')) start++;
  while (end > start && (v[end - 1] === ' ' || v[end - 1] === '\t')) end--;
  return v.slice(start, end);
}

export function parseClientAuthorization(
  value: string,
): { accessKeyId: string; date: string; region: string; service: string; signedHeaders: string[] } | null {
  // Spaces and tabs trimmed without a regular expression: a lazy `(.*?)`
  // before `[ \t]*$` rescanned a run of spaces from each of its positions.
  const trimmed = trimSpaceTab(value);
  const m = /^AWS4-HMAC-SHA256[ \t]+/.exec(trimmed);
  if (m === null) return null;
  const fields = new Map<string, string>();
  for (const piece of trimmed.slice(m[0].length).split(',')) {
    const f = /^[ \t]*(Credential|SignedHeaders|Signature)=([^\s,]+)[ \t]*$/.exec(piece);
    if (f === null || fields.has(f[1] as string)) return null;
    fields.set(f[1] as string, f[2] as string);
  }
  const credential = parseCredential(fields.get('Credential') ?? '');
  const signedHeaders = parseSignedHeaders(fields.get('SignedHeaders') ?? '');
  if (credential === null || signedHeaders === null) return null;
  if (!/^[0-9a-f]{64}$/.test(fields.get('Signature') ?? '')) return null;
  return { ...credential, signedHeaders };
}

// Query parameters that make a URL carry its own signature (SigV4 query
// signing, and SigV2's AWSAccessKeyId), lower-cased.
const PRESIGN_PARAMS = new Set([
  'x-amz-algorithm',
  'x-amz-credential',
  'x-amz-date',
  'x-amz-expires',
  'x-amz-signedheaders',
  'x-amz-signature',
  'x-amz-security-token',
  'awsaccesskeyid',
]);

// A presigned URL: postern cannot sign it again. Names in any case, and
// percent-encoded, anywhere in the query.
export function isPresigned(query: string): boolean {
  for (const piece of query.replace(/^\?/, '').split('&')) {
    const eq = piece.indexOf('=');
    const name = percentDecode(eq === -1 ? piece : piece.slice(0, eq)).toString('latin1');
    if (PRESIGN_PARAMS.has(name.toLowerCase())) return true;
  }
  return false;
}

// x-amz-content-sha256 values whose body carries chunk signatures made with
// the client's key (aws-chunked payload signing): postern cannot sign them
// again. STREAMING-UNSIGNED-PAYLOAD-TRAILER signs no chunk, so it is not one.
export function isStreamingPayload(value: string): boolean {
  const v = value.trim();
  return /^STREAMING-/i.test(v) && v !== 'STREAMING-UNSIGNED-PAYLOAD-TRAILER';
}
