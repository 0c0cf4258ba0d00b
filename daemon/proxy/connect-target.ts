// The authority of a CONNECT request (RFC 9110 §9.3.6): `host:port`, the
// host a DNS name or an IP literal (IPv6 in brackets), the port 1–65535.
// The host is checked by the same rules as a URL's (target.ts).
import { Refusal } from '../../shared/errors';
import { parseTarget, type Target } from '../pipeline/target';
import { PLACEHOLDER_IN_TEXT } from '../stores/runs';

export interface ConnectTarget {
  host: string; // lower case; an IPv6 literal without brackets
  port: number;
  target: Target; // https://host:port/, for the resolution steps
}

const AUTHORITY = /^(\[[0-9A-Fa-f:.]+\]|[^\s:[\]/?#@]+):([0-9]{1,5})$/;

function bad(authority: string, why: string): never {
  throw new Refusal(
    'bad_request',
    `CONNECT ${JSON.stringify(authority.slice(0, 200))}: ${why}; send CONNECT host:port with a host name or IP literal and a port from 1 to 65535`,
  );
}

export function parseConnectTarget(authority: string): ConnectTarget {
  const m = AUTHORITY.exec(authority);
  if (!m) bad(authority, 'not a host:port');
  const port = Number(m[2]);
  if (port < 1 || port > 65535) bad(authority, `port ${m[2]} is out of range`);
  let target: Target;
  try {
    target = parseTarget(`https://${m[1]}:${port}/`);
  } catch (e) {
    if (e instanceof Refusal) bad(authority, 'the host is not a valid host name or IP literal');
    throw e;
  }
  // A placeholder is honoured only in its credential's inject slot; in the
  // host it would go out in a DNS query (SPEC §11).
  if (PLACEHOLDER_IN_TEXT.test(target.host))
    throw new Refusal(
      'bad_request',
      "the CONNECT host holds a placeholder, which is honoured only in its credential's inject slot (a header); CONNECT to the host the request is for",
    );
  return { host: target.host.replace(/^\[|\]$/g, '').toLowerCase(), port, target };
}
