// A GitHub App's installation token for a request (SPEC §13): from the
// cache while it has life left, else obtained from the token endpoint with
// a JWT signed by the app's key. The endpoint is a target like any other:
// one resolution, every address classified with the credential's
// allow_addresses, the connection pinned to the address checked, the CA
// list of http.ca_file, no redirect followed; it needs no [[allow]] rule.
import { Refusal } from '../../../shared/errors';
import type { GithubAppInject, HttpCredentialDef } from '../../../shared/credential';
import { definitionHash } from '../../../shared/credential';
import type { SecretBytes } from '../../../shared/secret-bytes';
import type { PipelineServices } from '../context';
import { parseTarget, type Target } from '../target';
import { pinnedPool, resolveChecked } from '../http-steps';
import { sendPinned } from '../execute-http';
import { MAX_TOKEN_ANSWER_BYTES, appJwt, installationTokenRequest, parseInstallationToken } from './github-app';

const TOKEN_TIMEOUT_MS = 10_000;

export function tokenEndpoint(app: GithubAppInject): string {
  return `${app.api}/app/installations/${app.installation_id}/access_tokens`;
}

function endpointTarget(app: GithubAppInject): Target {
  try {
    return parseTarget(tokenEndpoint(app));
  } catch (e) {
    if (e instanceof Refusal)
      throw new Refusal('bad_request', `the token endpoint of the GitHub App is not a valid URL: ${e.message}`);
    throw e;
  }
}

export async function githubAppToken(
  s: PipelineServices,
  def: HttpCredentialDef & { inject: { github_app: GithubAppInject } },
  key: SecretBytes,
): Promise<string> {
  const app = def.inject.github_app;
  const hash = definitionHash(def);
  const now = new Date();
  const cached = s.stores.tokens.get(def.name, hash, now);
  if (cached !== null) return cached;
  try {
    return await obtain(s, def, key, hash, now);
  } catch (e) {
    // The agent's request was not sent: only the token request was.
    const r = e instanceof Refusal ? e : new Refusal('upstream_error', 'the GitHub App token could not be obtained');
    throw new Refusal(
      r.code,
      r.message.startsWith('the GitHub App')
        ? r.message
        : `obtaining the GitHub App token from ${tokenEndpoint(app)}: ${r.message}`,
      {
        ...(r.detail ?? {}),
        maybe_executed: false,
      },
    );
  }
}

async function obtain(
  s: PipelineServices,
  def: HttpCredentialDef & { inject: { github_app: GithubAppInject } },
  key: SecretBytes,
  hash: string,
  now: Date,
): Promise<string> {
  const app = def.inject.github_app;
  const target = endpointTarget(app);
  const { pinned } = await resolveChecked(s, target, def.allow_addresses);
  let jwt: string;
  try {
    jwt = appJwt(key.bytes, app.app_id, now);
  } catch (e) {
    throw new Refusal(
      'internal_error',
      `the stored key of credential "${def.name}" cannot sign a GitHub App JWT (${(e as Error).message}); a human can replace it with \`postern cred update ${def.name} --secret-file KEY.pem\``,
    );
  }
  const request = installationTokenRequest(app, jwt);
  const raw = await sendPinned(pinnedPool(s, def.name, target, pinned), target.host, {
    method: request.method,
    pathAndQuery: target.path + target.query,
    headers: request.headers,
    body: request.body,
    timeoutMs: TOKEN_TIMEOUT_MS,
    // One byte more than the largest answer read, so that a longer one is refused as such.
    readLimit: MAX_TOKEN_ANSWER_BYTES + 1,
  });
  const answer = parseInstallationToken(raw.status, raw.body, new Date());
  if (!answer.ok)
    throw new Refusal('upstream_error', `the GitHub App token endpoint ${tokenEndpoint(app)}: ${answer.message}`);
  s.stores.tokens.put(def.name, hash, answer.token, answer.expiresAt, new Date());
  return answer.token;
}
