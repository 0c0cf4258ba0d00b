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

// The API root the token request goes to: an https URL without query,
// fragment or user info; a trailing "/" is dropped ("https://api.github.com",
// or a GitHub Enterprise Server's "https://ghe.example.com/api/v3").
export function checkGithubApi(v: string): Check<string> {
  const hint = 'write the API root, e.g. "https://api.github.com" or "https://HOST/api/v3"';
  if (hasInvisible(v) || v.length > 512) return bad(`is not a URL; ${hint}`);
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    return bad(`${quote(v)} is not a URL; ${hint}`);
  }
  if (u.protocol !== 'https:') return bad(`${quote(v)} must be https; ${hint}`);
  if (u.username || u.password || u.search || u.hash || v.includes('?') || v.includes('#'))
    return bad(`${quote(v)} must not carry user info, a query or a fragment; ${hint}`);
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
