// `env` of a credential definition (SPEC §4, §11): the variables `postern
// run` sets to the credential's placeholder. Valid names are kept in order
// and printed back; every refused name is named with why; SSH credentials
// have none.
import t from 'tap';
import { definitionProblems } from '../helpers/definition-problems';
import { parseDefinitionToml, definitionToToml, definitionHash } from '../../shared/credential';

const http = (env: string) =>
  `name = "gh"\nkind = "http"\n${env}\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n\n[[allow]]\nhost = "api.github.com"\n`;
const ssh = (extra: string) =>
  `name = "box"\nkind = "ssh"\nhost = "build.example.com"\nuser = "deploy"\nauth = "key"\nhost_key = "SHA256:+DiY3wvvV6TuJJhbpZisF/zLDA0zPMSvHdkr4UvCOqU"\ncommands = ["ls"]\n${extra}\n`;

const problems = definitionProblems;

t.test('names are kept in order, printed and read back', async (t) => {
  const def = parseDefinitionToml(http('env = ["GH_TOKEN", "GITHUB_TOKEN"]'));
  t.same(def.kind === 'http' && def.env, ['GH_TOKEN', 'GITHUB_TOKEN']);
  const toml = definitionToToml(def);
  t.match(toml, /^allow_addresses = \[\]\nenv = \["GH_TOKEN", "GITHUB_TOKEN"\]\n/m);
  t.same(parseDefinitionToml(toml), def, 'the printed definition reads back equal');
});

t.test('no env and an empty one are the same definition as before env existed', async (t) => {
  const none = parseDefinitionToml(http(''));
  const empty = parseDefinitionToml(http('env = []'));
  t.notOk('env' in none);
  t.same(definitionHash(none), definitionHash(empty));
  t.notMatch(definitionToToml(none), /env/);
});

t.test('refused names, each at its path with its reason', async (t) => {
  const cases: [string, RegExp][] = [
    ['PATH', /PATH cannot be set to a placeholder: it changes where/],
    ['HOME', /HOME cannot be set/],
    ['LD_PRELOAD', /LD_PRELOAD cannot be set to a placeholder: it loads a library/],
    ['LD_WHATEVER', /the dynamic loader reads it/],
    ['DYLD_INSERT_LIBRARIES', /the dynamic loader reads it/],
    ['NODE_OPTIONS', /NODE_OPTIONS cannot be set to a placeholder: it can inject code/],
    ['HTTPS_PROXY', /`postern run` sets it itself/],
    ['HTTP_PROXY', /`postern run` sets it itself/],
    ['NO_PROXY', /`postern run` sets it itself/],
    ['ALL_PROXY', /a proxy setting/],
    ['FTP_PROXY', /a proxy setting, and `postern run` sets the proxy/],
    ['SSL_CERT_FILE', /`postern run` sets it itself/],
    ['NODE_EXTRA_CA_CERTS', /`postern run` sets it itself/],
    ['SSH_AUTH_SOCK', /`postern run` sets it itself/],
    ['NODE_USE_ENV_PROXY', /`postern run` sets it itself/],
    ['PYTHONSTARTUP', /Python reads it/],
    ['GIT_CONFIG_COUNT', /git reads it as configuration/],
    ['GIT_SSH_COMMAND', /code to run/],
    ['BASH_ENV', /code to run/],
    ['POSTERN_HOME', /postern's own setting/],
    ['gh_token', /is not an env variable name: upper-case letters/],
    ['1TOKEN', /is not an env variable name/],
    ['GH-TOKEN', /is not an env variable name/],
    ['', /is empty; name the variable/],
    ['A'.repeat(129), /longer than 128/],
  ];
  for (const [name, message] of cases) {
    const p = problems(http(`env = ["OK_TOKEN", ${JSON.stringify(name)}]`));
    t.equal(p.length, 1, `${name.slice(0, 20)}: one problem`);
    t.equal(p[0]?.path, 'env[1]', `${name.slice(0, 20)}: at its path`);
    t.match(p[0]?.message, message, `${name.slice(0, 20)}: ${p[0]?.message}`);
  }
});

t.test('a name twice, more than 16, or not a list of strings', async (t) => {
  t.same(problems(http('env = ["A", "B", "A"]')), [{ path: 'env[2]', message: '"A" is listed twice; keep one' }]);
  const many = Array.from({ length: 17 }, (_, i) => `"T${i}"`).join(', ');
  t.same(problems(http(`env = [${many}]`)), [{ path: 'env', message: 'must list at most 16 entries' }]);
  t.match(problems(http('env = "GH_TOKEN"')), [{ path: 'env', message: /must be a list/ }]);
  t.match(problems(http('env = [1]')), [{ path: 'env[0]', message: /must be a string/ }]);
});

t.test('SSH credentials refuse env, naming it and what to do', async (t) => {
  t.same(problems(ssh('')), []);
  const p = problems(ssh('env = ["GH_TOKEN"]'));
  t.equal(p.length, 1);
  t.equal(p[0]?.path, 'env');
  t.match(p[0]?.message, /is only for HTTP credentials.*remove env/);
});
