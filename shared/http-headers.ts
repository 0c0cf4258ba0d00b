// HTTP header rules shared by the agent's request headers (SPEC §6.2) and a
// credential's `[headers]` and `[inject]` (SPEC §4): which names postern
// manages itself, and what a name and a value may hold.
//
// Names are compared case-insensitively and with "_" read as "-": many
// servers (CGI, WSGI, PHP, some proxies) map `Content_Length` to the same
// variable as `Content-Length`, so a look-alike would frame or route the
// request all the same (a length the origin believes is how one request
// swallows the next, with its secret).
import type { HttpCredentialDef } from './credential/types';
import { injectForm } from './credential/types';

export interface ForbiddenHeader {
  name: string; // lower case
  prefix: boolean; // true: every name starting with `name`
  reason: string;
}

const FRAMING = 'postern frames the request itself (it could split or smuggle a request)';
const HOP = 'it is a hop-by-hop header postern manages on its own connection';
const ROUTING =
  'it tells servers and proxies where the request came from or where to route it, which a policy cannot check';
const OVERRIDE = 'it makes servers treat the request as another method or URL than the one the policy allowed';

export const FORBIDDEN_HEADERS: readonly ForbiddenHeader[] = [
  { name: 'host', prefix: false, reason: 'postern sets Host from the URL the policy checked' },
  { name: 'content-length', prefix: false, reason: FRAMING },
  { name: 'transfer-encoding', prefix: false, reason: FRAMING },
  { name: 'connection', prefix: false, reason: HOP },
  { name: 'upgrade', prefix: false, reason: 'it would switch the connection to another protocol no rule describes' },
  { name: 'te', prefix: false, reason: HOP },
  { name: 'trailer', prefix: false, reason: FRAMING },
  { name: 'keep-alive', prefix: false, reason: HOP },
  { name: 'expect', prefix: false, reason: 'postern sends the body at once; 100-continue handling is its own' },
  { name: 'accept-encoding', prefix: false, reason: 'postern asks for identity so it can redact and cap the response' },
  {
    name: 'proxy-',
    prefix: true,
    reason: 'proxy headers are for proxies, and Proxy-Authorization could carry credentials',
  },
  { name: 'forwarded', prefix: false, reason: ROUTING },
  { name: 'x-forwarded-', prefix: true, reason: ROUTING },
  { name: 'x-real-ip', prefix: false, reason: ROUTING },
  { name: 'x-http-method-override', prefix: false, reason: OVERRIDE },
  { name: 'x-http-method', prefix: false, reason: OVERRIDE },
  { name: 'x-method-override', prefix: false, reason: OVERRIDE },
  { name: 'x-original-url', prefix: false, reason: OVERRIDE },
  { name: 'x-rewrite-url', prefix: false, reason: OVERRIDE },
];

// RFC 9110 token; a value of printable ASCII, space and tab.
export const HEADER_TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
export const HEADER_VALUE = /^[\t\x20-\x7e]*$/;

// How a name is compared: lower case, "_" read as "-".
export function headerKey(name: string): string {
  return name.toLowerCase().replace(/_/g, '-');
}

// The rows that depend on the credential: the header it injects into, and
// Authorization when it uses HTTP Basic.
export function credentialHeaderRows(def: Pick<HttpCredentialDef, 'name' | 'inject'>): ForbiddenHeader[] {
  const inject = def.inject;
  if ('header' in inject) {
    return [
      { name: headerKey(inject.header), prefix: false, reason: `credential ${def.name} injects its secret into it` },
    ];
  }
  if ('aws_sigv4' in inject) {
    return ['authorization', 'x-amz-date', 'x-amz-content-sha256', 'x-amz-security-token'].map((name) => ({
      name,
      prefix: false,
      reason: `credential ${def.name} signs each request with AWS Signature V4 and sets it itself`,
    }));
  }
  if ('github_app' in inject || 'oauth2' in inject) {
    return [
      {
        name: 'authorization',
        prefix: false,
        reason: `credential ${def.name} sends the access token it obtains there itself`,
      },
    ];
  }
  if (injectForm(inject) === 'basic') {
    return [
      {
        name: 'authorization',
        prefix: false,
        reason: `credential ${def.name} sends its secret as HTTP Basic authorization`,
      },
    ];
  }
  return [];
}

export function forbiddenHeader(name: string, rows: readonly ForbiddenHeader[]): ForbiddenHeader | undefined {
  const key = headerKey(name);
  return rows.find((r) => (r.prefix ? key.startsWith(r.name) : key === r.name));
}
