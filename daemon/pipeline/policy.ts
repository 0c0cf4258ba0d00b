// Step 3 of POST /v1/http (SPEC §4, §6.1): does one of the credential's
// `[[allow]]` rules cover this request? A rule covers it when scheme, host,
// port, method and path all match; the strictest `approve` of every
// covering rule (and of the credential) applies.
//
// Decisions where the SPEC is silent:
// - The rule returned is the first covering rule whose approve is the
//   strictest found, so `ruleIndex` explains the approval asked for.
// - A refusal names the first part (in the order host, scheme, port, method,
//   path) that no rule still in the running allows, and lists the allowed
//   values of the rules that matched up to there. Those are the
//   credential's public targets (GET /v1/credentials shows them); the
//   query is never echoed.
// - With the query injection form, an agent's query parameter of the same
//   name (compared after percent-decoding, case-insensitively, also as
//   `name[...]`) is refused like the injected header: it would sit next to
//   the secret and servers differ in which one they take.
import type { HttpAllowRule, HttpCredentialDef, Approve } from '../../shared/credential';
import { stricterApprove } from '../../shared/credential';
import { hostPatternMatches } from '../../shared/host-pattern';
import { Refusal } from '../../shared/errors';
import { quote } from '../../shared/credential/text';
import { checkAgentHeaders } from './headers';
import type { HttpRequest } from './validate';

export interface PolicyMatch {
  rule: HttpAllowRule;
  ruleIndex: number;
  approve: Approve;
}

// `*` matches any characters, "/" included; everything else is literal and
// case-sensitive. Linear in the path for each literal piece (no regex, so
// no backtracking on hostile paths).
export function pathPatternMatches(pattern: string, path: string): boolean {
  const pieces = pattern.split('*');
  if (pieces.length === 1) return pattern === path;
  const first = pieces[0] as string;
  const last = pieces[pieces.length - 1] as string;
  if (path.length < first.length + last.length) return false;
  if (!path.startsWith(first) || !path.endsWith(last)) return false;
  let at = first.length;
  const end = path.length - last.length;
  for (const piece of pieces.slice(1, -1)) {
    const found = path.indexOf(piece, at);
    if (found === -1 || found + piece.length > end) return false;
    at = found + piece.length;
  }
  return true;
}

interface Part {
  what: string;
  requested: (req: HttpRequest) => string;
  matches: (rule: HttpAllowRule, req: HttpRequest) => boolean;
  allowed: (rule: HttpAllowRule) => readonly (string | number)[];
}

// The order in which a refusal looks for the part that did not match.
const PARTS: readonly Part[] = [
  {
    what: 'host',
    requested: (r) => r.target.host,
    matches: (rule, r) => hostPatternMatches(rule.host, r.target.host),
    allowed: (rule) => [rule.host],
  },
  {
    what: 'scheme',
    requested: (r) => r.target.scheme,
    matches: (rule, r) => rule.schemes.includes(r.target.scheme),
    allowed: (rule) => rule.schemes,
  },
  {
    what: 'port',
    requested: (r) => String(r.target.port),
    matches: (rule, r) => rule.ports.includes(r.target.port),
    allowed: (rule) => rule.ports,
  },
  {
    what: 'method',
    requested: (r) => r.method,
    matches: (rule, r) => rule.methods.includes(r.method),
    allowed: (rule) => rule.methods,
  },
  {
    what: 'path',
    requested: (r) => quote(r.target.path, 200),
    matches: (rule, r) => rule.paths.some((p) => pathPatternMatches(p, r.target.path)),
    allowed: (rule) => rule.paths,
  },
];

function plural(what: string): string {
  return what === 'path' ? 'paths' : `${what}s`;
}

function denial(def: HttpCredentialDef, req: HttpRequest): Refusal {
  let candidates = def.allow;
  for (const part of PARTS) {
    const next = candidates.filter((rule) => part.matches(rule, req));
    if (next.length === 0) {
      const allowed = [...new Set(candidates.flatMap((rule) => part.allowed(rule).map(String)))];
      const scope = part.what === 'host' ? '' : ` for ${req.target.host}`;
      return new Refusal(
        'denied_policy',
        `no rule of credential ${def.name} allows ${part.what} ${part.requested(req)}${scope}; allowed ${plural(part.what)}: ${allowed.join(', ')}. ` +
          'Use a target the credential allows (GET /v1/credentials lists them), or ask its owner to change its rules',
        { part: part.what },
      );
    }
    candidates = next;
  }
  // Every part matched some rule in turn, so a rule covers the request.
  throw new Error('policy: denial asked for a request that a rule covers');
}

export function checkPolicy(def: HttpCredentialDef, req: HttpRequest): PolicyMatch {
  let best: PolicyMatch | null = null;
  for (const [ruleIndex, rule] of def.allow.entries()) {
    if (!PARTS.every((part) => part.matches(rule, req))) continue;
    const approve = stricterApprove(def.approve, rule.approve);
    if (best === null || stricterApprove(best.approve, approve) !== best.approve) best = { rule, ruleIndex, approve };
  }
  if (best === null) throw denial(def, req);
  return best;
}

// The agent's headers against the table and the credential's own rows (the
// header it injects into; Authorization for HTTP Basic).
export function checkHeadersForCredential(req: HttpRequest, def: HttpCredentialDef): [string, string][] {
  return checkAgentHeaders(req.rawHeaders, def);
}

function decodeName(text: string): string {
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '));
  } catch {
    return text;
  }
}

// The query injection form: the agent may not send the parameter itself.
export function checkQueryForCredential(req: HttpRequest, def: HttpCredentialDef): void {
  if (!('query' in def.inject) || req.target.query.length <= 1) return;
  const injected = def.inject.query.toLowerCase();
  for (const pair of req.target.query.slice(1).split(/[&;]/)) {
    const eq = pair.indexOf('=');
    const name = decodeName(eq === -1 ? pair : pair.slice(0, eq)).toLowerCase();
    if (name === injected || name.startsWith(`${injected}[`)) {
      throw new Refusal(
        'bad_request',
        `url query parameter "${def.inject.query}" may not be sent: credential ${def.name} injects its secret into it; remove it from the query`,
      );
    }
  }
}
