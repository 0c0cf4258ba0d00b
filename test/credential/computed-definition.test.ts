// The computed injection forms of an HTTP definition (SPEC §13): valid ones
// normalised, printed and read back equal; each bad field refused at its
// path with what to write; one form only; the secret's shape checked for
// its form at `cred add`, and a change of form needing a new secret.
import t from 'tap';
import { definitionProblems } from '../helpers/definition-problems';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseDefinitionToml, definitionToToml, checkHttpSecret } from '../../shared/credential';
import { Refusal } from '../../shared/errors';
import { startStack } from '../helpers/stack';
import { cli } from '../helpers/postern';

const http = (inject: string) =>
  `name = "c"\nkind = "http"\n[inject]\n${inject}\n\n[[allow]]\nhost = "api.example.com"\n`;

const problems = definitionProblems;

t.test('valid computed forms are normalised, printed and read back equal', async (t) => {
  const aws = parseDefinitionToml(http('aws_sigv4 = { region = "eu-west-1", service = "s3" }'));
  t.same(aws.kind === 'http' && aws.inject, { aws_sigv4: { region: 'eu-west-1', service: 's3' } });
  t.same(parseDefinitionToml(definitionToToml(aws)), aws);
  const app = parseDefinitionToml(
    http(
      '[inject.github_app]\napp_id = 1\ninstallation_id = 2\napi = "https://ghe.example.com/api/v3/"\nrepositories = ["app", "app", "docs"]\npermissions = { contents = "read", pull_requests = "write" }',
    ),
  );
  t.same(app.kind === 'http' && app.inject, {
    github_app: {
      app_id: 1,
      installation_id: 2,
      api: 'https://ghe.example.com/api/v3',
      repositories: ['app', 'docs'],
      permissions: { contents: 'read', pull_requests: 'write' },
    },
  });
  t.match(
    definitionToToml(app),
    /github_app = \{ app_id = 1, installation_id = 2, api = "https:\/\/ghe\.example\.com\/api\/v3"/,
  );
  t.same(parseDefinitionToml(definitionToToml(app)), app, 'the printed definition reads back equal');
  const oauth = parseDefinitionToml(
    http(
      '[inject.oauth2]\ntoken_url = "https://auth.example.com/token"\nclient_id = "c"\ngrant = "refresh_token"\nscopes = ["a", "a", "b"]',
    ),
  );
  t.same(oauth.kind === 'http' && oauth.inject, {
    oauth2: {
      token_url: 'https://auth.example.com/token',
      client_id: 'c',
      grant: 'refresh_token',
      scopes: ['a', 'b'],
      client_auth: 'basic',
    },
  });
  t.same(parseDefinitionToml(definitionToToml(oauth)), oauth, 'an OAuth definition reads back equal');
  const plain = parseDefinitionToml(http('[inject.github_app]\napp_id = 1\ninstallation_id = 2'));
  t.same(plain.kind === 'http' && plain.inject, {
    github_app: { app_id: 1, installation_id: 2, api: 'https://api.github.com' },
  });
});

t.test('each bad field refused at its path', async (t) => {
  const rows: [string, string, RegExp][] = [
    ['aws_sigv4 = { region = "EU-WEST-1", service = "s3" }', 'inject.aws_sigv4.region', /not an AWS region/],
    ['aws_sigv4 = { region = "eu-west-1", service = "s3 x" }', 'inject.aws_sigv4.service', /signing name/],
    ['aws_sigv4 = { region = "eu-west-1" }', 'inject.aws_sigv4.service', /required/],
    [
      'aws_sigv4 = { region = "eu-west-1", service = "s3", extra = 1 }',
      'inject.aws_sigv4.extra',
      /allowed here: region, service/,
    ],
    ['aws_sigv4 = "s3"', 'inject.aws_sigv4', /must be/],
    [
      'header = "X-Key"\ntemplate = "{secret}"\naws_sigv4 = { region = "eu-west-1", service = "s3" }',
      'inject',
      /found header, aws_sigv4/,
    ],
    ['[inject.github_app]\ninstallation_id = 2', 'inject.github_app.app_id', /required/],
    ['[inject.github_app]\napp_id = 0\ninstallation_id = 2', 'inject.github_app.app_id', /integer from 1/],
    ['[inject.github_app]\napp_id = 1.5\ninstallation_id = 2', 'inject.github_app.app_id', /float/],
    [
      '[inject.github_app]\napp_id = 1\ninstallation_id = 2\napi = "http://api.github.com"',
      'inject.github_app.api',
      /must be https/,
    ],
    [
      '[inject.github_app]\napp_id = 1\ninstallation_id = 2\napi = "https://api.github.com/?x=1"',
      'inject.github_app.api',
      /query/,
    ],
    [
      '[inject.github_app]\napp_id = 1\ninstallation_id = 2\napi = "https://u:p@api.github.com"',
      'inject.github_app.api',
      /user info/,
    ],
    ['[inject.github_app]\napp_id = 1\ninstallation_id = 2\napi = "not a url"', 'inject.github_app.api', /not a URL/],
    [
      '[inject.github_app]\napp_id = 1\ninstallation_id = 2\nrepositories = ["acme/app"]',
      'inject.github_app.repositories[0]',
      /without the owner/,
    ],
    [
      '[inject.github_app]\napp_id = 1\ninstallation_id = 2\nrepositories = []',
      'inject.github_app.repositories',
      /at least one/,
    ],
    [
      '[inject.github_app]\napp_id = 1\ninstallation_id = 2\npermissions = { contents = "all" }',
      'inject.github_app.permissions.contents',
      /"read" or "write" or "admin"/,
    ],
    [
      '[inject.github_app]\napp_id = 1\ninstallation_id = 2\npermissions = { "Bad-Name" = "read" }',
      'inject.github_app.permissions.Bad-Name',
      /permission name/,
    ],
    [
      '[inject.github_app]\napp_id = 1\ninstallation_id = 2\nowner = "acme"',
      'inject.github_app.owner',
      /allowed here: app_id, installation_id, api, repositories, permissions/,
    ],
  ];
  const oauth = (extra: string) =>
    `[inject.oauth2]\ntoken_url = "https://auth.example.com/token"\nclient_id = "c"\ngrant = "client_credentials"\n${extra}`;
  rows.push(
    [oauth('').replace('https://auth', 'http://auth'), 'inject.oauth2.token_url', /must be https/],
    [oauth('').replace('/token"', '/token?x=1"'), 'inject.oauth2.token_url', /query/],
    [oauth('').replace('client_id = "c"', 'client_id = ""'), 'inject.oauth2.client_id', /1 to 256 printable ASCII/],
    [
      oauth('').replace('"client_credentials"', '"password"'),
      'inject.oauth2.grant',
      /"client_credentials" or "refresh_token"/,
    ],
    [oauth('scopes = ["a b"]'), 'inject.oauth2.scopes[0]', /not an OAuth scope/],
    [oauth('client_auth = "jwt"'), 'inject.oauth2.client_auth', /"basic" or "post"/],
    [
      oauth('audience = "x"'),
      'inject.oauth2.audience',
      /allowed here: token_url, client_id, grant, scopes, client_auth/,
    ],
  );
  for (const [inject, path, message] of rows) {
    const p = problems(http(inject));
    const at = p.find((x) => x.path === path);
    t.ok(at, `${inject.replace(/\n/g, ' ')}: a problem at ${path} (got ${JSON.stringify(p)})`);
    t.match(at?.message, message, path);
  }
});

t.test('the secret is checked for its form', async (t) => {
  const aws = parseDefinitionToml(http('aws_sigv4 = { region = "eu-west-1", service = "s3" }'));
  const app = parseDefinitionToml(http('[inject.github_app]\napp_id = 1\ninstallation_id = 2'));
  const refused = (f: () => void): string => {
    try {
      f();
    } catch (e) {
      if (e instanceof Refusal) return e.message;
      throw e;
    }
    return 'accepted';
  };
  const injectOf = (d: typeof aws) => (d.kind === 'http' ? d.inject : undefined);
  t.equal(
    refused(() =>
      checkHttpSecret(Buffer.from('AKIAIOSFODNN7EXAMPLE:wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY'), injectOf(aws)),
    ),
    'accepted',
  );
  const bad = 'AKIAIOSFODNN7EXAMPLE';
  const m = refused(() => checkHttpSecret(Buffer.from(bad), injectOf(aws)));
  t.match(m, /no ':' between the access key id and the secret key/);
  t.notMatch(m, bad, 'the message holds no part of the secret');
  t.match(
    refused(() => checkHttpSecret(Buffer.from('ghp_token'), injectOf(app))),
    /not in PEM form/,
  );
  const dir = mkdtempSync(join(tmpdir(), 'pt-compdef-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  execFileSync('openssl', ['genrsa', '-out', join(dir, 'k.pem'), '2048'], { stdio: 'ignore' });
  t.equal(
    refused(() => checkHttpSecret(readFileSync(join(dir, 'k.pem')), injectOf(app))),
    'accepted',
  );
  t.match(
    refused(() => checkHttpSecret(readFileSync(join(dir, 'k.pem')))),
    /control character/,
    'a PEM is no header secret',
  );
});

t.test('cred update to another form needs a new secret', async (t) => {
  const s = await startStack();
  t.teardown(() => s.close());
  s.addCredential('c', http('header = "Authorization"\ntemplate = "Bearer {secret}"'), 'token-0123456789');
  const r = cli(s.h, [
    'cred',
    'update',
    'c',
    '--file',
    s.h.file('c.toml', http('aws_sigv4 = { region = "eu-west-1", service = "s3" }')),
    '--passphrase-file',
    s.h.passFile,
  ]);
  t.equal(r.code, 1, r.stderr);
  t.match(r.stderr, /sent → aws_sigv4\) needs a new secret of that shape; pass --secret-file/);
  const ok = cli(s.h, [
    'cred',
    'update',
    'c',
    '--file',
    s.h.file('c2.toml', http('aws_sigv4 = { region = "eu-west-1", service = "s3" }')),
    '--secret-file',
    s.h.file('aws.secret', 'AKIAIOSFODNN7EXAMPLE:wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY'),
    '--passphrase-file',
    s.h.passFile,
  ]);
  t.equal(ok.code, 0, ok.stderr);
});
