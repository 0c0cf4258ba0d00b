// The stored secret of an OAuth 2.0 credential (SPEC §13), read where it is
// stored (`cred add`, and the daemon again) and where a token is obtained.
import type { OAuth2Inject } from './types';

export interface OAuthSecret {
  // Views of the stored secret, not copies: wiping the secret wipes them.
  clientSecret: Buffer | null;
  refreshToken: Buffer | null;
}

const LF = 0x0a;

// RFC 6749 Appendix A: a client secret and a refresh token are VSCHARs
// (printable ASCII, space included).
function badByte(part: Buffer, what: string, form: string): string | null {
  for (const b of part) {
    if (b === 0x0d) return `the OAuth secret's ${what} contains a carriage return; ${form}, with "\\n" line ends only`;
    if (b < 0x20 || b === 0x7f)
      return `the OAuth secret's ${what} contains a control character (a tab, NUL...); ${form}`;
    if (b >= 0x80) return `the OAuth secret's ${what} contains a byte that is not ASCII; ${form}`;
  }
  return null;
}

const CLIENT_FORM = 'give the client secret itself, on one line';
const REFRESH_FORM = 'give the refresh token, then (for a confidential client) a newline and the client secret';

// The stored secret of an oauth2 credential: for client_credentials the
// client secret; for refresh_token the refresh token, optionally followed by
// "\n" and the client secret (a public client has none). Or a one-line
// problem that never contains any part of it.
export function oauthSecretParts(
  secret: Buffer,
  grant: OAuth2Inject['grant'],
): ({ ok: true } & OAuthSecret) | { ok: false; problem: string } {
  if (grant === 'client_credentials') {
    if (secret.length === 0) return { ok: false, problem: `the OAuth client secret is empty; ${CLIENT_FORM}` };
    if (secret.includes(LF)) {
      return { ok: false, problem: `the OAuth client secret has more than one line; ${CLIENT_FORM}` };
    }
    const problem = badByte(secret, 'client secret', CLIENT_FORM);
    return problem === null ? { ok: true, clientSecret: secret, refreshToken: null } : { ok: false, problem };
  }
  if (secret.length === 0) return { ok: false, problem: `the OAuth secret is empty; ${REFRESH_FORM}` };
  const nl = secret.indexOf(LF);
  const refreshToken = nl === -1 ? secret : secret.subarray(0, nl);
  const clientSecret = nl === -1 ? null : secret.subarray(nl + 1);
  if (refreshToken.length === 0) {
    return { ok: false, problem: `the OAuth secret's first line (the refresh token) is empty; ${REFRESH_FORM}` };
  }
  if (clientSecret !== null && clientSecret.includes(LF)) {
    return { ok: false, problem: `the OAuth secret has more than two lines; ${REFRESH_FORM}` };
  }
  if (clientSecret !== null && clientSecret.length === 0) {
    return {
      ok: false,
      problem: `the OAuth secret's second line (the client secret) is empty; ${REFRESH_FORM} (a public client has no second line)`,
    };
  }
  const problem =
    badByte(refreshToken, 'refresh token', REFRESH_FORM) ??
    (clientSecret === null ? null : badByte(clientSecret, 'client secret', REFRESH_FORM));
  return problem === null ? { ok: true, clientSecret, refreshToken } : { ok: false, problem };
}
