// A GitHub App's installation token for a request (SPEC §13): from the
// cache while it has life left, else obtained from the token endpoint
// (token-endpoint.ts) with a JWT signed by the app's key.
import { Refusal } from '../../../shared/errors';
import type { GithubAppInject, HttpCredentialDef } from '../../../shared/credential';
import { definitionHash } from '../../../shared/credential';
import type { SecretBytes } from '../../../shared/secret-bytes';
import type { PipelineServices } from '../context';
import {
  MAX_TOKEN_ANSWER_BYTES,
  appJwt,
  installationTokenRequest,
  parseInstallationToken,
  type Obtained,
} from './github-app';
import { callTokenEndpoint, tokenFailure } from './token-endpoint';

export function tokenEndpoint(app: GithubAppInject): string {
  return `${app.api}/app/installations/${app.installation_id}/access_tokens`;
}

export async function githubAppToken(
  s: PipelineServices,
  def: HttpCredentialDef & { inject: { github_app: GithubAppInject } },
  key: SecretBytes,
): Promise<Obtained> {
  const hash = definitionHash(def);
  // One token request at a time (concurrent first requests share it); the
  // JWT is signed before the first await, while the key is open.
  return s.stores.tokens.obtainOnce(def.name, hash, (ticket) => obtain(s, def, hash, key, ticket));
}

async function obtain(
  s: PipelineServices,
  def: HttpCredentialDef & { inject: { github_app: GithubAppInject } },
  hash: string,
  key: SecretBytes,
  ticket: number,
): Promise<Obtained> {
  const app = def.inject.github_app;
  const url = tokenEndpoint(app);
  try {
    let jwt: string;
    try {
      jwt = appJwt(key.bytes, app.app_id, new Date());
    } catch (e) {
      throw new Refusal(
        'internal_error',
        `the stored key of credential "${def.name}" cannot sign a GitHub App JWT (${(e as Error).message}); a human can replace it with \`postern cred update ${def.name} --secret-file KEY.pem\``,
      );
    }
    const request = installationTokenRequest(app, jwt);
    // One byte more than the largest answer read, so a longer one is refused as such.
    const raw = await callTokenEndpoint(s, def, {
      url,
      headers: request.headers,
      body: request.body,
      readLimit: MAX_TOKEN_ANSWER_BYTES + 1,
    });
    const answer = parseInstallationToken(raw.status, raw.body, new Date());
    if (!answer.ok) throw new Refusal('upstream_error', `the GitHub App token endpoint ${url}: ${answer.message}`);
    s.stores.tokens.put(def.name, hash, answer.token, answer.expiresAt, ticket);
    return { token: answer.token, rotated: null };
  } catch (e) {
    throw tokenFailure(url, e);
  }
}
