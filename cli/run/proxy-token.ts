// The per-run proxy token: the user name and password CMD's clients present
// to `postern run`'s loopback proxy (SPEC §11). Another local process that
// finds the port cannot use it without the token.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

export function newProxyToken(): string {
  return randomBytes(32).toString('base64url');
}

// Both sides hashed first, so the comparison takes the same time whatever
// the length of what was sent.
function same(a: string, b: string): boolean {
  const digest = (s: string): Buffer => createHash('sha256').update(s, 'utf8').digest();
  return timingSafeEqual(digest(a), digest(b));
}

// Why a Proxy-Authorization value does not carry the token, or null when it
// does (as user name and as password, `Basic base64(token:token)`).
export function proxyCredentialsProblem(values: string[], token: string): string | null {
  if (values.length === 0) return 'the request has no Proxy-Authorization header';
  if (values.length > 1) return 'the request has more than one Proxy-Authorization header';
  const m = /^Basic[ \t]+([A-Za-z0-9+/=_-]+)[ \t]*$/i.exec(values[0]!);
  if (!m) return 'Proxy-Authorization is not Basic credentials';
  const text = Buffer.from(m[1]!, 'base64').toString('utf8');
  const colon = text.indexOf(':');
  const user = colon < 0 ? text : text.slice(0, colon);
  const password = colon < 0 ? '' : text.slice(colon + 1);
  // Both compared, always, so a right user name is not told apart by time.
  const userOk = same(user, token);
  const passwordOk = same(password, token);
  return userOk && passwordOk ? null : "the proxy user name and password are not this run's token";
}
