// What a credential may reach, for `cred list` and the agent's
// GET /v1/credentials. Visibility is not authorisation: this only tells an
// agent what it could ask for; every request is still checked.
import { CredentialDef, Approve, HttpScheme } from './types';

export interface HttpTarget {
  host: string;
  schemes: HttpScheme[];
  ports: number[];
  methods: string[];
  paths: string[];
  approve: Approve;
}

export type TargetSummary =
  | { kind: 'http'; allow: HttpTarget[] }
  | { kind: 'ssh'; host: string; port: number; user: string; commands: string[]; stdin: boolean; approve: Approve };

// Copies, so a caller cannot change the stored definition through them.
export function summariseTargets(def: CredentialDef): TargetSummary {
  if (def.kind === 'ssh') {
    return {
      kind: 'ssh',
      host: def.host,
      port: def.port,
      user: def.user,
      commands: [...def.commands],
      stdin: def.stdin,
      approve: def.approve,
    };
  }
  return {
    kind: 'http',
    allow: def.allow.map((r) => ({
      host: r.host,
      schemes: [...r.schemes],
      ports: [...r.ports],
      methods: [...r.methods],
      paths: [...r.paths],
      approve: r.approve,
    })),
  };
}

// One line per rule (HTTP) or per command (SSH), for terminals:
//   GET,POST https://api.github.com:443 /repos/acme/app/*
//   deploy@build.example.com:22 $ systemctl restart app-*   [each use]
export function formatTargets(summary: TargetSummary): string[] {
  const mark = (a: Approve): string => (a === 'each-use' ? '  [each use]' : '');
  if (summary.kind === 'ssh') {
    const host = summary.host.includes(':') ? `[${summary.host}]` : summary.host;
    return summary.commands.map((c) => `${summary.user}@${host}:${summary.port} $ ${c}${mark(summary.approve)}`);
  }
  return summary.allow.map(
    (r) =>
      `${r.methods.join(',')} ${r.schemes.join('|')}://${r.host}:${r.ports.join('|')} ${r.paths.join(' ')}${mark(r.approve)}`,
  );
}
