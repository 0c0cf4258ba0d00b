// Credential definitions (SPEC §4): every invalid shape is refused with code
// invalid_definition and every problem named by its path; valid ones are
// normalised, print back to TOML that reads to the same definition, hash
// stably and diff readably.
import t, { Test } from 'tap';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isRefusal, Refusal, Problem } from '../../shared/errors';
import {
  parseDefinitionToml,
  validateDefinition,
  definitionToToml,
  definitionHash,
  diffDefinitions,
  summariseTargets,
  formatTargets,
  parseRate,
  injectForm,
  stricterApprove,
  CredentialDef,
  HttpCredentialDef,
  SshCredentialDef,
} from '../../shared/credential';
import { testSource } from '../helpers/repo-root';

const FIXTURES = testSource('fixtures', 'credentials');
const fixture = (name: string): string => readFileSync(join(FIXTURES, name), 'utf8');

function refusalOf(fn: () => unknown): Refusal {
  try {
    fn();
  } catch (e) {
    if (isRefusal(e)) return e;
    throw e;
  }
  throw new Error('expected a Refusal, got a value');
}

function problemsOf(r: Refusal): Problem[] {
  return (r.detail?.['problems'] ?? []) as Problem[];
}

function show(value: unknown): string {
  return JSON.stringify(value).replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

// A valid HTTP definition with parts replaced.
interface HttpParts {
  top?: string;
  inject?: string | null;
  allow?: string[] | null;
}
function httpToml(p: HttpParts = {}): string {
  const top = p.top ?? 'name = "github"\nkind = "http"';
  const inject = p.inject === undefined ? 'header = "Authorization"\ntemplate = "Bearer {secret}"' : p.inject;
  const allow = p.allow === undefined ? ['host = "api.github.com"'] : p.allow;
  return [top, inject === null ? '' : `[inject]\n${inject}`, ...(allow ?? []).map((r) => `[[allow]]\n${r}`)].join(
    '\n\n',
  );
}

const SSH_BASE: Record<string, string> = {
  name: '"deploy-box"',
  kind: '"ssh"',
  host: '"build.example.com"',
  user: '"deploy"',
  auth: '"key"',
  host_key: '"SHA256:+DiY3wvvV6TuJJhbpZisF/zLDA0zPMSvHdkr4UvCOqU"',
  commands: '["git -C /srv/app pull"]',
};
// A valid SSH definition with keys replaced (value) or removed (null).
function sshToml(changes: Record<string, string | null> = {}): string {
  const all: Record<string, string | null> = { ...SSH_BASE, ...changes };
  return Object.entries(all)
    .filter((e): e is [string, string] => e[1] !== null)
    .map(([k, v]) => `${k} = ${v}`)
    .join('\n');
}

// [title, toml, every expected problem as [path, message pattern]]
type Row = [string, string, [string, RegExp][]];

const httpRows: Row[] = [
  // inject
  [
    'header and query',
    httpToml({ inject: 'header = "Authorization"\ntemplate = "Bearer {secret}"\nquery = "key"' }),
    [
      [
        'inject',
        /exactly one of header, basic_user, query, aws_sigv4, github_app, oauth2 must be set \(found header, query\)/,
      ],
    ],
  ],
  [
    'basic_user and query',
    httpToml({ inject: 'basic_user = "u"\nquery = "key"' }),
    [
      [
        'inject',
        /exactly one of header, basic_user, query, aws_sigv4, github_app, oauth2 must be set \(found basic_user, query\)/,
      ],
    ],
  ],
  [
    'empty [inject]',
    httpToml({ inject: '' }),
    [['inject', /exactly one of header, basic_user, query, aws_sigv4, github_app, oauth2 must be set \(found none\)/]],
  ],
  ['no [inject]', httpToml({ inject: null }), [['inject', /is required: add an \[inject\] table/]]],
  [
    'header without template',
    httpToml({ inject: 'header = "Authorization"' }),
    [['inject.template', /is required with header/]],
  ],
  [
    'template without header',
    httpToml({ inject: 'basic_user = "u"\ntemplate = "x {secret}"' }),
    [['inject.template', /only used with header/]],
  ],
  [
    '{secret} missing',
    httpToml({ inject: 'header = "Authorization"\ntemplate = "Bearer {SECRET}"' }),
    [['inject.template', /\{secret\} exactly once \(found none; it is case-sensitive\)/]],
  ],
  [
    '{secret} twice',
    httpToml({ inject: 'header = "Authorization"\ntemplate = "{secret}{secret}"' }),
    [['inject.template', /\{secret\} exactly once \(found 2\)/]],
  ],
  [
    'template with CRLF',
    httpToml({ inject: 'header = "Authorization"\ntemplate = "Bearer {secret}\\r\\nX-Evil: 1"' }),
    [['inject.template', /CR, LF or NUL/]],
  ],
  [
    'template with NUL',
    httpToml({ inject: 'header = "Authorization"\ntemplate = "Bearer {secret}\\u0000"' }),
    [['inject.template', /CR, LF or NUL/]],
  ],
  [
    'template not ASCII',
    httpToml({ inject: 'header = "Authorization"\ntemplate = "Bearer\u00a0{secret}"' }),
    [['inject.template', /printable ASCII/]],
  ],
  [
    'header with a space',
    httpToml({ inject: 'header = "X Api Key"\ntemplate = "{secret}"' }),
    [['inject.header', /not a valid HTTP header name/]],
  ],
  [
    'header with a colon',
    httpToml({ inject: 'header = "X-Key:"\ntemplate = "{secret}"' }),
    [['inject.header', /not a valid HTTP header name/]],
  ],
  [
    'header Host',
    httpToml({ inject: 'header = "Host"\ntemplate = "{secret}"' }),
    [['inject.header', /"host" cannot carry a secret/]],
  ],
  [
    'header Content-Length',
    httpToml({ inject: 'header = "Content-Length"\ntemplate = "{secret}"' }),
    [['inject.header', /cannot carry a secret/]],
  ],
  [
    'header X-Forwarded-For',
    httpToml({ inject: 'header = "X-Forwarded-For"\ntemplate = "{secret}"' }),
    [['inject.header', /cannot carry a secret/]],
  ],
  [
    'header Proxy-Authorization',
    httpToml({ inject: 'header = "Proxy-Authorization"\ntemplate = "{secret}"' }),
    [['inject.header', /cannot carry a secret/]],
  ],
  [
    'basic_user with a colon',
    httpToml({ inject: 'basic_user = "a:b"' }),
    [['inject.basic_user', /must not contain ":"/]],
  ],
  [
    'basic_user with a newline',
    httpToml({ inject: 'basic_user = "a\\nb"' }),
    [['inject.basic_user', /control or invisible/]],
  ],
  ['empty query', httpToml({ inject: 'query = ""' }), [['inject.query', /is empty/]]],
  ['query with a space', httpToml({ inject: 'query = "api key"' }), [['inject.query', /use only letters/]]],
  [
    'unknown key in [inject]',
    httpToml({ inject: 'header = "Authorization"\ntemplate = "Bearer {secret}"\nprefix = "x"' }),
    [
      [
        'inject.prefix',
        /unknown key; remove it \(allowed here: header, template, basic_user, query, aws_sigv4, github_app, oauth2\)/,
      ],
    ],
  ],
  [
    'misspelt key in [inject]',
    httpToml({ inject: 'Header = "Authorization"\ntemplate = "Bearer {secret}"' }),
    [
      ['inject', /found none/],
      ['inject.template', /only used with header/],
      ['inject.Header', /did you mean header\?/],
    ],
  ],
  // allow rules
  ['no [[allow]]', httpToml({ allow: null }), [['allow', /is required: add at least one \[\[allow\]\] rule/]]],
  [
    'allow = []',
    httpToml({ top: 'name = "github"\nkind = "http"\nallow = []', allow: null }),
    [['allow', /at least one entry/]],
  ],
  ['rule without host', httpToml({ allow: ['methods = ["GET"]'] }), [['allow[0].host', /is required/]]],
  [
    'unknown key in [[allow]]',
    httpToml({ allow: ['host = "api.github.com"\nhosts = ["x"]'] }),
    [['allow[0].hosts', /unknown key; remove it \(did you mean host\?\)/]],
  ],
  [
    'second rule bad',
    httpToml({ allow: ['host = "api.github.com"', 'host = "*"'] }),
    [['allow[1].host', /whole first label/]],
  ],
  ...(
    [
      ['*', /whole first label/],
      ['*.com', /at least two labels/],
      ['a.*.com', /whole first label/],
      ['foo*.com', /whole first label/],
      ['', /is empty/],
      ['api github.com', /whitespace/],
      ['api.github.com:443', /must not contain a port/],
      ['user@api.github.com', /userinfo/],
      ['https://api.github.com', /without scheme or path/],
      ['127.1', /four decimal numbers/],
    ] as [string, RegExp][]
  ).map(([host, re]): Row => [
    `host ${show(host)}`,
    httpToml({ allow: [`host = ${JSON.stringify(host)}`] }),
    [['allow[0].host', re]],
  ]),
  ['host not a string', httpToml({ allow: ['host = 1'] }), [['allow[0].host', /must be a string, not 1/]]],
  [
    'schemes ftp',
    httpToml({ allow: ['host = "a.example"\nschemes = ["ftp"]'] }),
    [['allow[0].schemes[0]', /must be "http" or "https"/]],
  ],
  [
    'schemes upper case',
    httpToml({ allow: ['host = "a.example"\nschemes = ["HTTPS"]'] }),
    [['allow[0].schemes[0]', /must be "http" or "https"/]],
  ],
  [
    'schemes empty',
    httpToml({ allow: ['host = "a.example"\nschemes = []'] }),
    [['allow[0].schemes', /at least one entry/]],
  ],
  [
    'port 0',
    httpToml({ allow: ['host = "a.example"\nports = [0]'] }),
    [['allow[0].ports[0]', /integer from 1 to 65535, not 0/]],
  ],
  [
    'port 65536',
    httpToml({ allow: ['host = "a.example"\nports = [65536]'] }),
    [['allow[0].ports[0]', /integer from 1 to 65535, not 65536/]],
  ],
  [
    'port "443"',
    httpToml({ allow: ['host = "a.example"\nports = ["443"]'] }),
    [['allow[0].ports[0]', /integer from 1 to 65535, not the string "443"/]],
  ],
  [
    'port 443.0',
    httpToml({ allow: ['host = "a.example"\nports = [443.0]'] }),
    [['allow[0].ports[0]', /integer from 1 to 65535, not the float 443/]],
  ],
  [
    'port huge',
    httpToml({ allow: ['host = "a.example"\nports = [9223372036854775807]'] }),
    [['allow[0].ports[0]', /integer from 1 to 65535/]],
  ],
  [
    'ports not a list',
    httpToml({ allow: ['host = "a.example"\nports = 443'] }),
    [['allow[0].ports', /must be a list, not 443/]],
  ],
  ['ports empty', httpToml({ allow: ['host = "a.example"\nports = []'] }), [['allow[0].ports', /at least one entry/]]],
  [
    'method with a space',
    httpToml({ allow: ['host = "a.example"\nmethods = ["GE T"]'] }),
    [['allow[0].methods[0]', /not an HTTP method/]],
  ],
  [
    'method empty',
    httpToml({ allow: ['host = "a.example"\nmethods = [""]'] }),
    [['allow[0].methods[0]', /not an HTTP method/]],
  ],
  [
    'method with CRLF',
    httpToml({ allow: ['host = "a.example"\nmethods = ["GET\\r\\n"]'] }),
    [['allow[0].methods[0]', /not an HTTP method/]],
  ],
  [
    'method TRACE',
    httpToml({ allow: ['host = "a.example"\nmethods = ["trace"]'] }),
    [['allow[0].methods[0]', /TRACE is not allowed/]],
  ],
  [
    'method CONNECT',
    httpToml({ allow: ['host = "a.example"\nmethods = ["CONNECT"]'] }),
    [['allow[0].methods[0]', /CONNECT is not allowed/]],
  ],
  [
    'method *',
    httpToml({ allow: ['host = "a.example"\nmethods = ["*"]'] }),
    [['allow[0].methods[0]', /"\*" is not a method/]],
  ],
  [
    'methods empty',
    httpToml({ allow: ['host = "a.example"\nmethods = []'] }),
    [['allow[0].methods', /at least one entry/]],
  ],
  ...(
    [
      ['repos/*', /must start with "\/"/],
      ['', /is empty/],
      ['/a/../b', /"\." or "\.\." segment/],
      ['/a/./b', /"\." or "\.\." segment/],
      ['/a/..', /"\." or "\.\." segment/],
      ['/a//b', /contains "\/\/"/],
      ['/a%2Fb', /encoded "\/", "\." or "\\"/],
      ['/a%2fb', /encoded/],
      ['/a%2E%2E/b', /encoded/],
      ['/a%5cb', /encoded/],
      ['/a?b=1', /path only/],
      ['/a#frag', /path only/],
      ['/a\\b', /contains "\\"/],
      ['/a b', /percent-encoded/],
      ['/caf\u00e9', /percent-encoded/],
      ['/a%zz', /two hex digits/],
      // forms some origin reads as another path (SPEC §4): a request with
      // them is refused, so a rule naming them could never match
      ['/public/..;/admin/*', /segment "\.\.;" is a "\." or "\.\." segment with a ";" parameter.*could never match/],
      ['/public/.;x/*', /segment "\.;x" is a "\." or "\.\." segment with a ";" parameter/],
      ['/public/..;jsessionid=*', /";" parameter.*could never match/],
      ['/public/;x/admin', /empty before its ";" parameter/],
      ['/public/%252e%252e/*', /percent-encoded twice.*could never match/],
      ['/public/%255C*', /percent-encoded twice/],
      ['/public/%25%32%46*', /percent-encoded twice/],
      ['/public/..%3B/*', /read as a "\." or "\.\." segment once percent-decoded/],
      ['/public/%C0%AE%C0%AE/*', /not valid UTF-8.*could never match/],
      ['/public/%ED%A0%80', /not valid UTF-8/],
      ['/public/%EF%BC%8E%EF%BC%8E/*', /"\." or "\.\." segment under Unicode NFKC normalisation/],
      ['/public/a%EF%BC%8Fb', /NFKC normalisation.*"\/" or "\\"/],
    ] as [string, RegExp][]
  ).map(([path, re]): Row => [
    `path ${show(path)}`,
    httpToml({ allow: [`host = "a.example"\npaths = [${JSON.stringify(path)}]`] }),
    [['allow[0].paths[0]', re]],
  ]),
  ['paths empty', httpToml({ allow: ['host = "a.example"\npaths = []'] }), [['allow[0].paths', /at least one entry/]]],
  [
    'rule approve weaker than the credential',
    httpToml({
      top: 'name = "github"\nkind = "http"\napprove = "each-use"',
      allow: ['host = "a.example"\napprove = "session"'],
    }),
    [['allow[0].approve', /"session" is weaker than the credential's approve = "each-use"/]],
  ],
  [
    'rule approve unknown',
    httpToml({ allow: ['host = "a.example"\napprove = "never"'] }),
    [['allow[0].approve', /must be "session" or "each-use"/]],
  ],
  // top level
  [
    'approve unknown',
    httpToml({ top: 'name = "github"\nkind = "http"\napprove = "always"' }),
    [['approve', /must be "session" or "each-use", not the string "always"/]],
  ],
  [
    'unknown top-level key',
    httpToml({ top: 'name = "github"\nkind = "http"\ncolour = "blue"' }),
    [['colour', /unknown key; remove it \(allowed here: name, description/]],
  ],
  [
    'misspelt top-level key',
    httpToml({ top: 'name = "github"\nkind = "http"\nredact-response = false' }),
    [['redact-response', /did you mean redact_response\?/]],
  ],
  ['top-level key after a table', `${httpToml()}\nrate = "1/sec"`, [['allow[0].rate', /unknown key/]]],
  [
    'redact_response not a boolean',
    httpToml({ top: 'name = "github"\nkind = "http"\nredact_response = "yes"' }),
    [['redact_response', /must be true or false, not the string "yes"/]],
  ],
  [
    'pass_set_cookie not a boolean',
    httpToml({ top: 'name = "github"\nkind = "http"\npass_set_cookie = 1' }),
    [['pass_set_cookie', /must be true or false, not 1/]],
  ],
  ...(
    ['120', '120/fortnight', '0/min', '-1/min', '1.5/min', '120 /min', '120/MIN', '99999999/sec', ''] as string[]
  ).map((rate): Row => [
    `rate ${show(rate)}`,
    httpToml({ top: `name = "github"\nkind = "http"\nrate = ${JSON.stringify(rate)}` }),
    [['rate', /is not a rate; write "N\/unit"/]],
  ]),
  [
    'rate a number',
    httpToml({ top: 'name = "github"\nkind = "http"\nrate = 120' }),
    [['rate', /must be a string, not 120/]],
  ],
  ...(
    [
      ['10.0.0.0', /is not a CIDR/],
      ['10.0.0.0/33', /not a valid CIDR/],
      ['10.0.0.0/08', /is not a CIDR/],
      ['010.0.0.0/8', /four decimal numbers/],
      ['127.1/8', /four decimal numbers/],
      ['fe80::1%eth0/64', /zone ids/],
      ['fe80::/129', /not a valid CIDR/],
      ['example.com/24', /four decimal numbers/],
      [' 10.0.0.0/8', /four decimal numbers/],
      ['', /is not a CIDR/],
    ] as [string, RegExp][]
  ).map(([cidr, re]): Row => [
    `allow_addresses ${show(cidr)}`,
    httpToml({ top: `name = "github"\nkind = "http"\nallow_addresses = [${JSON.stringify(cidr)}]` }),
    [['allow_addresses[0]', re]],
  ]),
  [
    'allow_addresses not a list',
    httpToml({ top: 'name = "github"\nkind = "http"\nallow_addresses = "10.0.0.0/8"' }),
    [['allow_addresses', /must be a list/]],
  ],
  [
    'description with a newline',
    httpToml({ top: 'name = "github"\nkind = "http"\ndescription = """\nline one\nline two"""' }),
    [['description', /control or invisible/]],
  ],
  [
    'description with a bidi override',
    httpToml({ top: 'name = "github"\nkind = "http"\ndescription = "abc\u202edef"' }),
    [['description', /control or invisible/]],
  ],
  [
    'description with ESC',
    httpToml({ top: 'name = "github"\nkind = "http"\ndescription = "\\u001b[31mred"' }),
    [['description', /control or invisible/]],
  ],
  [
    'description too long',
    httpToml({ top: `name = "github"\nkind = "http"\ndescription = "${'x'.repeat(501)}"` }),
    [['description', /longer than 500/]],
  ],
];

const nameRows: Row[] = (
  [
    ['GitHub', /not a valid name/],
    ['-github', /not a valid name/],
    ['.github', /not a valid name/],
    ['git hub', /not a valid name/],
    ['g\u00efthub', /not a valid name/],
    ['github\n', /not a valid name/],
    ['a'.repeat(65), /is 65 characters long; at most 64/],
    ['', /is empty/],
  ] as [string, RegExp][]
).map(([name, re]): Row => [
  `name ${show(name)}`,
  httpToml({ top: `name = ${JSON.stringify(name)}\nkind = "http"` }),
  [['name', re]],
]);

const kindRows: Row[] = [
  ['kind missing', 'name = "x"', [['kind', /is required: kind = "http" or kind = "ssh"/]]],
  ['kind unknown', 'name = "x"\nkind = "ftp"', [['kind', /must be "http" or "ssh", not the string "ftp"/]]],
  ['kind not a string', 'name = "x"\nkind = 1', [['kind', /must be "http" or "ssh", not 1/]]],
  [
    'kind unknown, common fields still checked',
    'name = "X"\nkind = "HTTP"\napprove = "maybe"',
    [
      ['name', /not a valid name/],
      ['kind', /not the string "HTTP"/],
      ['approve', /must be "session" or "each-use"/],
    ],
  ],
  [
    'name missing',
    'kind = "ssh"\n' + sshToml({ name: null, kind: null }),
    [['name', /is required: the name agents use/]],
  ],
  ['TOML syntax error', 'name = "x"\nkind = "http"\n[inject\n', [['', /not valid TOML at line 3, column \d+/]]],
  ['duplicate key', 'name = "x"\nname = "y"\nkind = "http"', [['', /not valid TOML at line 2/]]],
  ['__proto__ key', httpToml({ top: 'name = "github"\nkind = "http"\n__proto__ = 1' }), [['__proto__', /unknown key/]]],
  [
    'a key with a bidi override is printed escaped',
    httpToml({ top: 'name = "github"\nkind = "http"\n"a\u202eb" = 1' }),
    [['"a\\u202eb"', /unknown key/]],
  ],
  [
    'a value with C1 and tag characters is printed escaped',
    httpToml({ top: 'name = "x\u009b2J\\U000E0041"\nkind = "http"' }),
    [['name', /^"x\\u009b2J\\u\{e0041\}" is not a valid name/]],
  ],
  [
    'a date value',
    httpToml({ top: 'name = "github"\nkind = "http"\ndescription = 1979-05-27' }),
    [['description', /must be a string, not a date/]],
  ],
];

const sshRows: Row[] = [
  ['user missing', sshToml({ user: null }), [['user', /is required: the remote user/]]],
  ['user empty', sshToml({ user: '""' }), [['user', /is empty/]]],
  ['user starting with -', sshToml({ user: '"-oProxyCommand=x"' }), [['user', /not starting with "-"/]]],
  ['auth missing', sshToml({ auth: null }), [['auth', /is required: auth = "key" or auth = "password"/]]],
  ['auth agent', sshToml({ auth: '"agent"' }), [['auth', /must be "key" or "password"/]]],
  ['host missing', sshToml({ host: null }), [['host', /is required/]]],
  ['host wildcard', sshToml({ host: '"*.example.com"' }), [['host', /wildcards are only for HTTP/]]],
  ['host with port', sshToml({ host: '"build.example.com:2222"' }), [['host', /set port = N/]]],
  ['port 0', sshToml({ port: '0' }), [['port', /integer from 1 to 65535, not 0/]]],
  ['port "22"', sshToml({ port: '"22"' }), [['port', /not the string "22"/]]],
  ['host_key missing', sshToml({ host_key: null }), [['host_key', /is required: the pinned fingerprint/]]],
  ['host_key short', sshToml({ host_key: '"SHA256:abc"' }), [['host_key', /not a SHA256 fingerprint/]]],
  [
    'host_key without prefix',
    sshToml({ host_key: '"+DiY3wvvV6TuJJhbpZisF/zLDA0zPMSvHdkr4UvCOqU"' }),
    [['host_key', /not a SHA256 fingerprint/]],
  ],
  [
    'host_key padded',
    sshToml({ host_key: '"SHA256:+DiY3wvvV6TuJJhbpZisF/zLDA0zPMSvHdkr4UvCOqU="' }),
    [['host_key', /base64 padding/]],
  ],
  [
    'host_key lower-case prefix',
    sshToml({ host_key: '"sha256:+DiY3wvvV6TuJJhbpZisF/zLDA0zPMSvHdkr4UvCOqU"' }),
    [['host_key', /not a SHA256 fingerprint/]],
  ],
  [
    'host_key non-canonical base64',
    sshToml({ host_key: '"SHA256:+DiY3wvvV6TuJJhbpZisF/zLDA0zPMSvHdkr4UvCOqV"' }),
    [['host_key', /not a canonical base64/]],
  ],
  [
    'host_key MD5',
    sshToml({ host_key: '"MD5:16:27:ac:a5:76:28:2d:36:63:1b:56:4d:eb:df:a6:48"' }),
    [['host_key', /MD5 fingerprints are not accepted/]],
  ],
  ['commands missing', sshToml({ commands: null }), [['commands', /is required: the allowed commands/]]],
  ['commands empty', sshToml({ commands: '[]' }), [['commands', /at least one entry/]]],
  ['command rule with inner *', sshToml({ commands: '["ls", "a * b"]' }), [['commands[1]', /not the last character/]]],
  ['command rule empty', sshToml({ commands: '[""]' }), [['commands[0]', /is empty/]]],
  ['command rule with a tab', sshToml({ commands: '["ls\\t*"]' }), [['commands[0]', /control or invisible/]]],
  ['command rule with a newline', sshToml({ commands: '["ls\\nid"]' }), [['commands[0]', /control or invisible/]]],
  ['command rule trailing space', sshToml({ commands: '["ls "]' }), [['commands[0]', /starts or ends with a space/]]],
  ['command rule double space', sshToml({ commands: '["ls  -l"]' }), [['commands[0]', /two spaces/]]],
  ['command rule only *', sshToml({ commands: '["*"]' }), [['commands[0]', /only "\*"/]]],
  ['stdin not a boolean', sshToml({ stdin: '"no"' }), [['stdin', /must be true or false, not the string "no"/]]],
  ['stdin 0', sshToml({ stdin: '0' }), [['stdin', /must be true or false, not 0/]]],
  [
    'HTTP keys in an SSH definition',
    `${sshToml({ rate: '"1/sec"' })}\n[inject]\nquery = "k"`,
    [
      ['rate', /unknown key/],
      ['inject', /unknown key/],
    ],
  ],
  ['bad allow_addresses', sshToml({ allow_addresses: '["nope"]' }), [['allow_addresses[0]', /is not a CIDR/]]],
];

function checkRows(t: Test, rows: Row[]): void {
  for (const [title, toml, expected] of rows) {
    const r = refusalOf(() => parseDefinitionToml(toml, 'def.toml'));
    t.equal(r.code, 'invalid_definition', `${title}: code`);
    const problems = problemsOf(r);
    t.same(
      problems.map((p) => p.path),
      expected.map(([path]) => path),
      `${title}: paths`,
    );
    expected.forEach(([path, re], i) => t.match(problems[i]?.message, re, `${title}: ${path}`));
    t.match(r.message, /^def\.toml: /, `${title}: names the source`);
    t.match(r.message, /fix the definition and run the command again$/, `${title}: says what to do`);
  }
}

t.test('HTTP definitions: each problem refused with its path', async (t) => checkRows(t, httpRows));
t.test('names', async (t) => checkRows(t, nameRows));
t.test('kind, syntax and document-level problems', async (t) => checkRows(t, kindRows));
t.test('SSH definitions: each problem refused with its path', async (t) => checkRows(t, sshRows));

t.test('several problems are all reported at once, in document order', async (t) => {
  const r = refusalOf(() => parseDefinitionToml(fixture('many-problems.toml'), 'many-problems.toml'));
  t.equal(r.code, 'invalid_definition');
  const problems = problemsOf(r);
  t.same(
    problems.map((p) => p.path),
    [
      'name',
      'rate',
      'allow_addresses[0]',
      'inject.template',
      'allow[0].host',
      'allow[0].ports[0]',
      'allow[0].methods[0]',
      'allow[0].paths[0]',
      'allow[0].approve',
      'colour',
    ],
  );
  t.match(
    r.message,
    /^many-problems\.toml: 10 problems: name: .*; colour: unknown key.*; fix the definition and run the command again$/,
  );
});

t.test('path rules that look like refused forms but are not are accepted as written', async (t) => {
  const paths = [
    '/public/*',
    '/public/a.b',
    '/public/...',
    '/public/a;v=1/*',
    '/public/x;..',
    '/public/;jsessionid=*',
    '/public/%C3%A9*',
    '/public/%2520',
    '/public/%E2%80%A6',
  ];
  const def = parseDefinitionToml(
    httpToml({ allow: [`host = "a.example"\npaths = ${JSON.stringify(paths)}`] }),
  ) as HttpCredentialDef;
  t.same(def.allow[0]?.paths, paths);
});

t.test('validateDefinition: not a table, and the same checks on JSON input', async (t) => {
  for (const input of [null, 5, 'name = "x"', [], undefined]) {
    const r = refusalOf(() => validateDefinition(input));
    t.equal(r.code, 'invalid_definition');
    t.same(problemsOf(r), [{ path: '', message: 'must be a table of keys (a TOML document)' }]);
  }
  const r = refusalOf(() =>
    validateDefinition({
      name: 'x',
      kind: 'http',
      inject: { query: 'k' },
      allow: [{ host: 'a.example', ports: [443.5] }],
    }),
  );
  t.same(
    problemsOf(r).map((p) => p.path),
    ['allow[0].ports[0]'],
  );
  t.match(r.message, /^credential definition: 1 problem: /);
});

t.test('normalisation fills every default and normalises values', async (t) => {
  const min = parseDefinitionToml(fixture('minimal-basic.toml'));
  t.same(min, {
    name: 'registry',
    description: '',
    kind: 'http',
    approve: 'session',
    redact_response: true,
    pass_set_cookie: false,
    allow_addresses: [],
    inject: { basic_user: 'x-access-token' },
    allow: [
      {
        host: 'registry.example.com',
        schemes: ['https'],
        ports: [443],
        methods: ['GET'],
        paths: ['/*'],
        approve: 'session',
      },
    ],
  });
  t.notOk('rate' in min, 'no rate key when none is set');

  const q = parseDefinitionToml(fixture('query-wildcard.toml')) as HttpCredentialDef;
  t.same(q.allow_addresses, ['10.20.0.0/16', 'fd00:1::/64']);
  t.same(q.inject, { query: 'api_key' });
  t.same(q.allow[0], {
    host: '*.xn--bcher-kva.example',
    schemes: ['http', 'https'],
    ports: [80, 443],
    methods: ['GET', 'POST'],
    paths: ['/v2/*', '/status'],
    approve: 'each-use', // inherited from the credential
  });
  t.same(q.allow[1], {
    host: '[2001:db8::10]',
    schemes: ['https'],
    ports: [8443],
    methods: ['GET'],
    paths: ['/*'],
    approve: 'each-use',
  });
  t.equal(q.rate, '1000/day');

  const gh = parseDefinitionToml(fixture('github.toml')) as HttpCredentialDef;
  t.same(gh.inject, { header: 'authorization', template: 'Bearer {secret}' }, 'header lower-cased, template kept');
  t.equal(gh.allow[0]?.approve, 'each-use', 'a stricter rule approve is kept');

  const cidrs = parseDefinitionToml(
    httpToml({
      top: 'name = "x"\nkind = "http"\nallow_addresses = ["10.1.2.3/8", "10.0.0.0/8", "2001:DB8:0::1/32", "::ffff:127.0.0.1/128", "::ffff:10.0.0.0/104"]',
    }),
  ) as HttpCredentialDef;
  t.same(
    cidrs.allow_addresses,
    ['10.0.0.0/8', '2001:db8::/32', '127.0.0.1/32'],
    'network address, compressed IPv6, mapped IPv4, no duplicates',
  );

  const rates: [string, string][] = [
    ['120/min', '120/min'],
    ['0120/minute', '120/min'],
    ['5/s', '5/sec'],
    ['1/second', '1/sec'],
    ['3/h', '3/hour'],
    ['2/d', '2/day'],
  ];
  for (const [raw, norm] of rates) {
    const d = parseDefinitionToml(httpToml({ top: `name = "x"\nkind = "http"\nrate = "${raw}"` })) as HttpCredentialDef;
    t.equal(d.rate, norm, raw);
  }
  t.same(parseRate('120/min'), { count: 120, per_ms: 60_000 });
  t.equal(parseRate('nope'), null);

  const ssh = parseDefinitionToml(
    sshToml({ host: '"[2001:DB8::7]"', commands: '["uptime", "uptime", "df *"]' }),
  ) as SshCredentialDef;
  t.same(ssh, {
    name: 'deploy-box',
    description: '',
    kind: 'ssh',
    host: '2001:db8::7',
    port: 22,
    user: 'deploy',
    auth: 'key',
    host_key: 'SHA256:+DiY3wvvV6TuJJhbpZisF/zLDA0zPMSvHdkr4UvCOqU',
    commands: ['uptime', 'df *'],
    stdin: false,
    approve: 'session',
    allow_addresses: [],
  });
});

const VALID_FIXTURES = ['github.toml', 'deploy-box.toml', 'minimal-basic.toml', 'query-wildcard.toml'];

t.test('definitionToToml round-trips to an equal definition', async (t) => {
  for (const file of VALID_FIXTURES) {
    const def = parseDefinitionToml(fixture(file), file);
    const printed = definitionToToml(def);
    const again = parseDefinitionToml(printed, `${file} (printed)`);
    t.same(again, def, `${file}: same definition`);
    t.equal(definitionToToml(again), printed, `${file}: printing is stable`);
    t.same(validateDefinition(JSON.parse(JSON.stringify(def))), def, `${file}: the JSON form validates to itself`);
    // Top-level keys come before the first table.
    const firstTable = printed.search(/^\[/m);
    if (def.kind === 'http') {
      t.ok(firstTable > 0, `${file}: has tables`);
      t.notMatch(
        printed.slice(firstTable),
        /^(name|kind|rate|description|redact_response) =/m,
        `${file}: no top-level key after a table`,
      );
    } else t.equal(firstTable, -1, `${file}: no tables`);
  }
  const gh = definitionToToml(parseDefinitionToml(fixture('github.toml')));
  t.equal(
    gh,
    [
      'name = "github"',
      'description = "GitHub API for repo acme/app"',
      'kind = "http"',
      'approve = "session"',
      'redact_response = true',
      'pass_set_cookie = false',
      'rate = "120/min"',
      'allow_addresses = []',
      '',
      '[inject]',
      'header = "authorization"',
      'template = "Bearer {secret}"',
      '',
      '[[allow]]',
      'host = "api.github.com"',
      'schemes = ["https"]',
      'ports = [443]',
      'methods = ["GET", "POST"]',
      'paths = ["/repos/acme/app/*"]',
      'approve = "each-use"',
      '',
    ].join('\n'),
  );
  // Strings that need escaping survive the round trip.
  const tricky = parseDefinitionToml(
    httpToml({
      top: 'name = "x"\nkind = "http"\ndescription = "quote \\" backslash \\\\ caf\u00e9 \u{1F511}"',
      inject: 'header = "X-Key"\ntemplate = "k=\\"{secret}\\"\\t\\\\"',
    }),
  );
  t.same(parseDefinitionToml(definitionToToml(tricky)), tricky);
});

t.test('definitionHash is stable and follows the normalised form', async (t) => {
  const def = parseDefinitionToml(fixture('github.toml'));
  const hash = definitionHash(def);
  t.match(hash, /^sha256:[0-9a-f]{64}$/);
  // Pinned: the hash is recorded in the vault and the audit journal.
  t.equal(hash, 'sha256:ac1f70c9af1d50dd9383f4eb16c54001a073d1c7d27a92d295bc26e0af8038d3');
  t.equal(definitionHash(parseDefinitionToml(definitionToToml(def))), hash, 'printed and re-read');
  // The same definition written differently: keys reordered, defaults
  // spelt out or left out, case and trailing dot in the host.
  const reordered = [
    'kind = "http"',
    'allow_addresses = []',
    'rate = "120/minute"',
    'name = "github"',
    'description = "GitHub API for repo acme/app"',
    '[[allow]]',
    'approve = "each-use"',
    'paths = ["/repos/acme/app/*"]',
    'methods = ["get", "POST"]',
    'host = "API.GitHub.com."',
    '[inject]',
    'template = "Bearer {secret}"',
    'header = "AUTHORIZATION"',
  ].join('\n');
  t.equal(definitionHash(parseDefinitionToml(reordered)), hash, 'equivalent definitions hash equal');
  const changed = parseDefinitionToml(fixture('github.toml').replace('"GET", "POST"', '"GET"'));
  t.not(definitionHash(changed), hash, 'a change changes the hash');
});

t.test('diffDefinitions', async (t) => {
  const before = parseDefinitionToml(fixture('github.toml'));
  t.same(diffDefinitions(before, before), [], 'equal: no lines');
  t.same(diffDefinitions(before, parseDefinitionToml(definitionToToml(before))), [], 'equal after a round trip');

  const methods = parseDefinitionToml(fixture('github.toml').replace('methods = ["GET", "POST"]', 'methods = ["GET"]'));
  t.same(diffDefinitions(methods, before), ['- allow[0].methods = ["GET"]', '+ allow[0].methods = ["GET","POST"]']);

  const noRate = parseDefinitionToml(fixture('github.toml').replace('rate = "120/min"\n', ''));
  t.same(diffDefinitions(noRate, before), ['+ rate = "120/min"'], 'a key added');
  t.same(diffDefinitions(before, noRate), ['- rate = "120/min"'], 'a key removed');

  const twoRules = parseDefinitionToml(
    `${fixture('github.toml')}\n[[allow]]\nhost = "uploads.github.com"\nmethods = ["PUT"]\n`,
  );
  t.same(diffDefinitions(before, twoRules), [
    '+ allow[1].host = "uploads.github.com"',
    '+ allow[1].schemes = ["https"]',
    '+ allow[1].ports = [443]',
    '+ allow[1].methods = ["PUT"]',
    '+ allow[1].paths = ["/*"]',
    '+ allow[1].approve = "session"',
  ]);
  const basic = parseDefinitionToml(
    fixture('github.toml').replace('header = "Authorization"\ntemplate = "Bearer {secret}"', 'basic_user = "bot"'),
  );
  t.same(diffDefinitions(before, basic), [
    '- inject.header = "authorization"',
    '- inject.template = "Bearer {secret}"',
    '+ inject.basic_user = "bot"',
  ]);
  const ssh = parseDefinitionToml(fixture('deploy-box.toml')) as SshCredentialDef;
  const ssh2 = { ...ssh, commands: [...ssh.commands, 'uptime'], stdin: true };
  t.same(diffDefinitions(ssh, ssh2), [
    '- commands = ["git -C /srv/app pull","systemctl restart app-*"]',
    '+ commands = ["git -C /srv/app pull","systemctl restart app-*","uptime"]',
    '- stdin = false',
    '+ stdin = true',
  ]);
});

t.test('summariseTargets and formatTargets', async (t) => {
  const gh = parseDefinitionToml(fixture('github.toml'));
  const s = summariseTargets(gh);
  t.same(s, {
    kind: 'http',
    allow: [
      {
        host: 'api.github.com',
        schemes: ['https'],
        ports: [443],
        methods: ['GET', 'POST'],
        paths: ['/repos/acme/app/*'],
        approve: 'each-use',
      },
    ],
  });
  t.notMatch(JSON.stringify(s), /authorization|Bearer|secret/i, 'nothing about the injection');
  t.same(formatTargets(s), ['GET,POST https://api.github.com:443 /repos/acme/app/*  [each use]']);
  if (s.kind === 'http') s.allow[0]?.methods.push('DELETE');
  t.same((gh as HttpCredentialDef).allow[0]?.methods, ['GET', 'POST'], 'the summary is a copy');

  const box = parseDefinitionToml(fixture('deploy-box.toml'));
  const b = summariseTargets(box);
  t.same(b, {
    kind: 'ssh',
    host: 'build.example.com',
    port: 22,
    user: 'deploy',
    commands: ['git -C /srv/app pull', 'systemctl restart app-*'],
    stdin: false,
    approve: 'each-use',
  });
  t.same(formatTargets(b), [
    'deploy@build.example.com:22 $ git -C /srv/app pull  [each use]',
    'deploy@build.example.com:22 $ systemctl restart app-*  [each use]',
  ]);
  const v6 = parseDefinitionToml(sshToml({ host: '"2001:db8::7"', port: '2222' }));
  t.same(formatTargets(summariseTargets(v6)), ['deploy@[2001:db8::7]:2222 $ git -C /srv/app pull']);
});

t.test('the normalised definition is JSON-able and typed', async (t) => {
  const defs: CredentialDef[] = VALID_FIXTURES.map((f) => parseDefinitionToml(fixture(f)));
  for (const d of defs) t.same(JSON.parse(JSON.stringify(d)), d, d.name);
});

t.test('injectForm and stricterApprove', async (t) => {
  t.equal(injectForm({ header: 'authorization', template: 'Bearer {secret}' }), 'header');
  t.equal(injectForm({ basic_user: 'bot' }), 'basic');
  t.equal(injectForm({ query: 'api_key' }), 'query');
  t.equal(stricterApprove('session', 'session'), 'session');
  t.equal(stricterApprove('session', 'each-use'), 'each-use');
  t.equal(stricterApprove('each-use', 'session'), 'each-use');
});
