// A credential's [headers] (SPEC §4): request headers sent unless the agent
// sets them. Every name postern manages (SPEC §6.2), the header the
// credential injects into, Authorization with basic auth, look-alikes with
// "_" for "-" and case twins are refused, each problem at its own path; a
// value that is not printable ASCII or holds {secret} is refused; valid
// tables are normalised (names lower-cased, order kept), print back to TOML
// that reads to the same definition, and diff readably.
import t from 'tap';
import { isRefusal, Refusal, Problem } from '../../shared/errors';
import {
  parseDefinitionToml,
  definitionToToml,
  diffDefinitions,
  definitionHash,
  HttpCredentialDef,
} from '../../shared/credential';
import { FORBIDDEN_HEADERS } from '../../shared/http-headers';

const BEARER = '[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"';
const BASIC = '[inject]\nbasic_user = "me"';
const KEYED = '[inject]\nheader = "X-Api-Key"\ntemplate = "{secret}"';
const QUERY = '[inject]\nquery = "api_key"';

function toml(headers: string, inject = BEARER): string {
  return `name = "api"\nkind = "http"\n\n[headers]\n${headers}\n\n${inject}\n\n[[allow]]\nhost = "api.example.com"\n`;
}

function problems(text: string): Problem[] {
  try {
    parseDefinitionToml(text);
  } catch (e) {
    if (!isRefusal(e)) throw e;
    t.equal((e as Refusal).code, 'invalid_definition');
    return ((e as Refusal).detail?.['problems'] ?? []) as Problem[];
  }
  return [];
}

t.test('valid [headers] are normalised, printed and read back', async (t) => {
  const def = parseDefinitionToml(
    toml(
      'User-Agent = "acme-agent/1.0"\nX-GitHub-Api-Version = "2022-11-28"\nAccept = "application/vnd.github+json"\n"x.dotted" = "a b\\tc"',
    ),
  ) as HttpCredentialDef;
  t.same(def.headers, {
    'user-agent': 'acme-agent/1.0',
    'x-github-api-version': '2022-11-28',
    accept: 'application/vnd.github+json',
    'x.dotted': 'a b\tc',
  });
  t.same(
    Object.keys(def.headers!),
    ['user-agent', 'x-github-api-version', 'accept', 'x.dotted'],
    'in the order written',
  );
  const printed = definitionToToml(def);
  t.match(printed, /\[headers\]\nuser-agent = "acme-agent\/1.0"\n/);
  t.match(printed, /"x\.dotted" = "a b\\tc"/, 'a name TOML cannot take bare is quoted');
  t.ok(printed.indexOf('[headers]') < printed.indexOf('[inject]'), '[headers] before [inject]');
  const back = parseDefinitionToml(printed);
  t.same(back, def, 'reads back to the same definition');
  t.equal(definitionHash(back), definitionHash(def));
  const changed = parseDefinitionToml(
    toml(
      'User-Agent = "acme-agent/2.0"\nX-GitHub-Api-Version = "2022-11-28"\nAccept = "application/vnd.github+json"\n"x.dotted" = "a b\\tc"',
    ),
  );
  t.same(diffDefinitions(def, changed), [
    '- headers.user-agent = "acme-agent/1.0"',
    '+ headers.user-agent = "acme-agent/2.0"',
  ]);
});

t.test('no [headers], or an empty one, leaves the definition as before', async (t) => {
  const without = parseDefinitionToml(`name = "api"\nkind = "http"\n${BEARER}\n[[allow]]\nhost = "api.example.com"\n`);
  const empty = parseDefinitionToml(toml(''));
  t.notOk('headers' in without);
  t.notOk('headers' in empty, 'an empty table is no table');
  t.equal(
    definitionHash(without),
    definitionHash(empty),
    'the hash of a definition stored before [headers] existed is unchanged',
  );
});

t.test('every header postern manages is refused, in every spelling', async (t) => {
  for (const row of FORBIDDEN_HEADERS) {
    const name = row.prefix ? `${row.name}thing` : row.name;
    const spellings = [name, name.toUpperCase(), name.replace(/-/g, '_'), name.replace(/-/g, '_').toUpperCase()];
    for (const spelling of new Set(spellings)) {
      const p = problems(toml(`"${spelling}" = "v"`));
      t.equal(p.length, 1, `${spelling}: one problem`);
      t.match(
        p[0],
        {
          path: `headers.${/^[A-Za-z0-9_-]+$/.test(spelling) ? spelling : `"${spelling}"`}`,
          message: /^cannot be set: .*; remove it$/,
        },
        `${spelling} refused at its path`,
      );
    }
  }
});

t.test('the header the credential injects into, and Authorization with basic auth', async (t) => {
  t.match(problems(toml('Authorization = "token x"')), [
    { path: 'headers.Authorization', message: /credential api injects its secret into it/ },
  ]);
  t.match(problems(toml('authorization = "token x"')), [
    { path: 'headers.authorization', message: /injects its secret/ },
  ]);
  t.match(
    problems(toml('X_Api_Key = "x"', KEYED)),
    [{ path: 'headers.X_Api_Key', message: /injects its secret/ }],
    '"_" for "-" is the same header',
  );
  t.match(problems(toml('Authorization = "Basic eA=="', BASIC)), [
    { path: 'headers.Authorization', message: /HTTP Basic/ },
  ]);
  t.same(problems(toml('Authorization = "Bearer fixed"', QUERY)), [], 'a query credential may set Authorization');
  t.same(problems(toml('X-Api-Key = "other"')), [], 'a header the credential does not inject into is fine');
});

t.test('twins, bad names, bad values, {secret}, too many', async (t) => {
  t.match(problems(toml('User-Agent = "a"\nuser-agent = "b"')), [
    { path: 'headers.user-agent', message: /same header as "User-Agent"/ },
  ]);
  t.match(problems(toml('X-Trace = "a"\nx_trace = "b"')), [
    { path: 'headers.x_trace', message: /same header as "X-Trace"/ },
  ]);
  t.match(problems(toml('"bad name" = "v"')), [
    { path: 'headers."bad name"', message: /not a valid HTTP header name/ },
  ]);
  t.match(problems(toml('"" = "v"')), [{ path: 'headers.""', message: /is empty/ }]);
  t.match(problems(toml('"x-\u00e9" = "v"')), [{ path: /^headers\./, message: /not a valid HTTP header name/ }]);
  t.match(
    problems(toml('X-A = "line\\r\\nInjected: 1"')),
    [{ path: 'headers.X-A', message: /printable ASCII/ }],
    'CR LF refused',
  );
  t.match(problems(toml('X-A = "nul\\u0000"')), [{ path: 'headers.X-A', message: /printable ASCII/ }]);
  t.match(problems(toml('X-A = "caf\u00e9"')), [{ path: 'headers.X-A', message: /printable ASCII/ }]);
  t.match(problems(toml(`X-A = "${'v'.repeat(4097)}"`)), [{ path: 'headers.X-A', message: /longer than 4096/ }]);
  t.match(problems(toml('X-A = "Bearer {secret}"')), [
    { path: 'headers.X-A', message: /sent as written; the secret goes only where \[inject\] puts it/ },
  ]);
  t.match(problems(toml('X-A = 1')), [{ path: 'headers.X-A', message: /must be a string/ }]);
  t.match(problems(toml('X-A = ["a"]')), [{ path: 'headers.X-A', message: /must be a string/ }]);
  const many = Array.from({ length: 33 }, (_, i) => `X-H${i} = "v"`).join('\n');
  t.match(problems(toml(many)), [{ path: 'headers', message: /at most 32/ }]);
  t.same(problems(toml(Array.from({ length: 32 }, (_, i) => `X-H${i} = "v"`).join('\n'))), [], '32 are fine');
  t.match(
    problems(
      `name = "api"\nkind = "http"\nheaders = "User-Agent: x"\n${BEARER}\n[[allow]]\nhost = "api.example.com"\n`,
    ),
    [{ path: 'headers', message: /table/ }],
  );
  // Every problem at once, each at its path.
  const all = problems(toml('Host = "x"\nAuthorization = "y"\nX-A = "{secret}"'));
  t.same(all.map((p) => p.path).sort(), ['headers.Authorization', 'headers.Host', 'headers.X-A']);
});
