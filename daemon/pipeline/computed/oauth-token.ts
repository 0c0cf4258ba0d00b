// An OAuth 2.0 access token for a request (SPEC §13): from the cache while
// it has life left, else obtained from the credential's token endpoint
// (token-endpoint.ts) with the client credentials or the refresh token. A
// refresh token the server rotates is written to the vault, durably and
// journaled, before the new access token is used; one token request per
// credential at a time, so two requests never spend the same refresh token.
import { Refusal } from '../../../shared/errors';
import type { HttpCredentialDef, OAuth2Inject } from '../../../shared/credential';
import { definitionHash } from '../../../shared/credential';
import type { SecretBytes } from '../../../shared/secret-bytes';
import type { SealedSecret } from '../../vault/sealed-secrets';
import type { PipelineServices } from '../context';
import { MAX_OAUTH_ANSWER_BYTES, oauthSecretParts, oauthTokenRequest, parseOAuthTokenResponse } from './oauth2';
import { callTokenEndpoint, tokenFailure } from './token-endpoint';
import type { Obtained } from './github-app';

// Without expires_in the server gives no lifetime: the token is kept this
// long, then obtained again.
const UNSTATED_LIFE_MS = 5 * 60 * 1000;

type OAuthCredential = HttpCredentialDef & { inject: { oauth2: OAuth2Inject } };

// A request that comes while another is obtaining the token takes the same
// one (and the same rotation).
export function oauthToken(s: PipelineServices, def: OAuthCredential, secret: SecretBytes): Promise<Obtained> {
  const hash = definitionHash(def);
  // A copy the token request owns: it may outlive the request that started
  // it (which gives up at its timeout and closes its secret).
  return s.stores.tokens.obtainOnce(def.name, hash, (ticket) => {
    // The stored secret just opened: a rotation replaces it only while it
    // is still this one.
    const spent = s.vault().credential(def.name)?.secret;
    if (!spent) return Promise.reject(new Refusal('unknown_credential', `credential "${def.name}" was removed`));
    return obtain(s, def, hash, Buffer.from(secret.bytes), spent, ticket);
  });
}

async function obtain(
  s: PipelineServices,
  def: OAuthCredential,
  hash: string,
  secret: Buffer,
  spent: SealedSecret,
  ticket: number,
): Promise<Obtained> {
  const o = def.inject.oauth2;
  try {
    const parts = oauthSecretParts(secret, o.grant);
    if (!parts.ok)
      throw new Refusal(
        'internal_error',
        `the stored secret of credential "${def.name}" is not usable for OAuth (${parts.problem}); a human can replace it with \`postern cred update ${def.name} --secret-file FILE\``,
      );
    const request = oauthTokenRequest(o, parts);
    let raw;
    try {
      raw = await callTokenEndpoint(s, def, {
        url: o.token_url,
        headers: request.headers,
        body: request.body,
        // One byte more than the largest answer read, so a longer one is refused as such.
        readLimit: MAX_OAUTH_ANSWER_BYTES + 1,
      });
    } finally {
      request.body.fill(0);
    }
    const answer = parseOAuthTokenResponse(raw.status, raw.body, new Date());
    if (!answer.ok) throw new Refusal('upstream_error', `the OAuth token endpoint ${o.token_url}: ${answer.message}`);
    let rotated: string | null = null;
    if (o.grant === 'refresh_token' && answer.refreshToken !== null && parts.refreshToken !== null) {
      const fresh = Buffer.from(answer.refreshToken, 'latin1');
      if (!fresh.equals(parts.refreshToken)) {
        rotated = answer.refreshToken;
        await storeRotated(s, def, fresh, parts.clientSecret, spent);
      } else fresh.fill(0);
    }
    const now = new Date();
    s.stores.tokens.put(
      def.name,
      hash,
      answer.accessToken,
      answer.expiresAt ?? new Date(now.getTime() + UNSTATED_LIFE_MS),
      ticket,
      now,
    );
    return { token: answer.accessToken, rotated };
  } catch (e) {
    throw tokenFailure(o.token_url, e);
  } finally {
    secret.fill(0);
  }
}

// The new secret: the rotated refresh token, then the client secret as it
// was stored. Written before the access token is used: if the write fails,
// the request is refused rather than run with a token whose refresh token
// would be lost.
async function storeRotated(
  s: PipelineServices,
  def: OAuthCredential,
  rotated: Buffer,
  clientSecret: Buffer | null,
  spent: SealedSecret,
): Promise<void> {
  const secret = clientSecret ? Buffer.concat([rotated, Buffer.from('\n'), clientSecret]) : Buffer.from(rotated);
  try {
    await s.secrets.replace(def.name, secret, spent);
  } catch (e) {
    if (e instanceof Refusal && (e.code === 'busy' || e.code === 'unknown_credential')) throw e;
    throw new Refusal(
      'internal_error',
      `the authorization server rotated the refresh token of credential "${def.name}", but the vault could not store the new one (${(e as Error).message}); the request was not sent, and the old refresh token may no longer work: a human may need to store a new one with \`postern cred update ${def.name} --secret-file FILE\``,
    );
  } finally {
    secret.fill(0);
    rotated.fill(0);
  }
}
