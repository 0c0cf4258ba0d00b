// The rebuild of a parsed definition into the normalised one: defaults
// filled in, lists deduplicated, rule approval never weaker than the
// credential's.
import { z } from 'zod';
import type { httpSchema, sshSchema } from './shape';
import {
  Approve,
  HttpCredentialDef,
  HttpInject,
  HttpAllowRule,
  HttpScheme,
  SshCredentialDef,
  stricterApprove,
} from './types';

type HttpParsed = z.output<typeof httpSchema>;
type SshParsed = z.output<typeof sshSchema>;

const DEFAULT_PORTS: Readonly<Record<HttpScheme, number>> = { http: 80, https: 443 };

function unique<T>(values: readonly T[]): T[] {
  return [...new Set(values)];
}

function buildInject(p: HttpParsed['inject']): HttpInject {
  if (p.header !== undefined) return { header: p.header, template: p.template as string };
  if (p.basic_user !== undefined) return { basic_user: p.basic_user };
  if (p.aws_sigv4 !== undefined) return { aws_sigv4: { region: p.aws_sigv4.region, service: p.aws_sigv4.service } };
  if (p.oauth2 !== undefined) {
    const o = p.oauth2;
    return {
      oauth2: {
        token_url: o.token_url,
        client_id: o.client_id,
        grant: o.grant,
        ...(o.scopes ? { scopes: unique(o.scopes) } : {}),
        client_auth: o.client_auth,
      },
    };
  }
  if (p.github_app !== undefined) {
    const g = p.github_app;
    return {
      github_app: {
        app_id: g.app_id,
        installation_id: g.installation_id,
        api: g.api,
        ...(g.repositories ? { repositories: unique(g.repositories) } : {}),
        ...(g.permissions ? { permissions: { ...g.permissions } } : {}),
      },
    };
  }
  return { query: p.query as string };
}

function buildRule(p: HttpParsed['allow'][number], credentialApprove: Approve): HttpAllowRule {
  const schemes = unique(p.schemes);
  return {
    host: p.host,
    schemes,
    ports: unique(p.ports ?? schemes.map((s) => DEFAULT_PORTS[s])),
    methods: unique(p.methods),
    paths: unique(p.paths),
    approve: stricterApprove(credentialApprove, p.approve ?? credentialApprove),
  };
}

export function buildHttp(p: HttpParsed): HttpCredentialDef {
  return {
    name: p.name,
    description: p.description,
    kind: 'http',
    approve: p.approve,
    redact_response: p.redact_response,
    pass_set_cookie: p.pass_set_cookie,
    ...(p.rate !== undefined ? { rate: p.rate } : {}),
    allow_addresses: unique(p.allow_addresses),
    ...(p.env !== undefined && p.env.length > 0 ? { env: p.env } : {}),
    ...(p.headers !== undefined && Object.keys(p.headers).length > 0
      ? { headers: Object.fromEntries(Object.entries(p.headers).map(([k, v]) => [k.toLowerCase(), v])) }
      : {}),
    inject: buildInject(p.inject),
    allow: p.allow.map((r) => buildRule(r, p.approve)),
  };
}

export function buildSsh(p: SshParsed): SshCredentialDef {
  return {
    name: p.name,
    description: p.description,
    kind: 'ssh',
    host: p.host,
    port: p.port,
    user: p.user,
    auth: p.auth,
    host_key: p.host_key,
    commands: unique(p.commands),
    stdin: p.stdin,
    approve: p.approve,
    allow_addresses: unique(p.allow_addresses),
    ...(p.ssh_agent ? { ssh_agent: true as const } : {}),
  };
}
