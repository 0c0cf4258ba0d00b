// Fields of the computed injection forms (SPEC §13): AWS Signature V4's
// region and service, and a GitHub App's API and token narrowing. Each
// check returns the normalised value or the problem, as fields.ts does.
import { Check, ok, bad, quote, hasInvisible } from './text';

// Region and service names as AWS writes them ("us-east-1", "s3",
// "execute-api"); "auto" is what S3-compatible stores such as R2 take.
export function checkAwsRegion(v: string): Check<string> {
  if (!/^[a-z0-9][a-z0-9-]{0,31}$/.test(v))
    return bad(`${quote(v)} is not an AWS region; write it as AWS does, e.g. "us-east-1"`);
  return ok(v);
}

export function checkAwsService(v: string): Check<string> {
  if (!/^[a-z0-9][a-z0-9-]{0,63}$/.test(v))
    return bad(`${quote(v)} is not an AWS service signing name; e.g. "s3", "sts", "execute-api"`);
  return ok(v);
}

// An https URL a token is obtained from: no user info, query or fragment
// (the text as written, or the problem; `hint` says what to write).
function checkHttpsUrl(v: string, maxLength: number, hint: string): Check<string> {
  if (hasInvisible(v) || v.length > maxLength) return bad(`is not a URL; ${hint}`);
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    return bad(`${quote(v)} is not a URL; ${hint}`);
  }
  if (u.protocol !== 'https:') return bad(`${quote(v)} must be https; ${hint}`);
  if (u.username || u.password || v.includes('?') || v.includes('#'))
    return bad(`${quote(v)} must not carry user info, a query or a fragment; ${hint}`);
  return ok(v);
}

// The API root the token request goes to; a trailing "/" is dropped
// ("https://api.github.com", or a GitHub Enterprise Server's
// "https://ghe.example.com/api/v3").
export function checkGithubApi(v: string): Check<string> {
  const hint = 'write the API root, e.g. "https://api.github.com" or "https://HOST/api/v3"';
  const r = checkHttpsUrl(v, 512, hint);
  if (!r.ok) return r;
  if (!/^https:\/\/[^/]+(\/[A-Za-z0-9._~-]+)*\/?$/.test(v)) return bad(`${quote(v)}: ${hint}`);
  return ok(v.replace(/\/$/, ''));
}

export function checkRepositoryName(v: string): Check<string> {
  if (!/^[A-Za-z0-9._-]{1,100}$/.test(v))
    return bad(`${quote(v)} is not a repository name (the name alone, without the owner: e.g. "app")`);
  return ok(v);
}

export const GITHUB_PERMISSION_LEVELS = ['read', 'write', 'admin'] as const;

export function checkPermissionName(v: string): Check<string> {
  if (!/^[a-z][a-z_]{0,63}$/.test(v))
    return bad(`${quote(v)} is not a GitHub App permission name (e.g. "contents", "pull_requests")`);
  return ok(v);
}

// An OAuth 2.0 token endpoint.
export function checkTokenUrl(v: string): Check<string> {
  return checkHttpsUrl(
    v,
    2048,
    'write the authorization server\'s token endpoint, e.g. "https://auth.example.com/oauth/token"',
  );
}

export function checkClientId(v: string): Check<string> {
  if (v === '' || v.length > 256 || !/^[\x20-\x7e]+$/.test(v))
    return bad('must be 1 to 256 printable ASCII characters, as the authorization server issued it');
  return ok(v);
}

// RFC 6749 §3.3 scope-token: printable ASCII but space, " and \.
export function checkScope(v: string): Check<string> {
  if (!/^[\x21\x23-\x5b\x5d-\x7e]{1,256}$/.test(v))
    return bad(`${quote(v)} is not an OAuth scope (one word of printable ASCII, without " or \\)`);
  return ok(v);
}
