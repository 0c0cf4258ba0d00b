// daemon.log_format (SPEC §3): "auto" writes short human lines when stderr
// is a terminal and JSON otherwise; "json" and "pretty" force one. Pretty
// lines escape every value, so what an agent writes (its `reason`) cannot
// clear the screen, retitle the terminal or forge a line of its own.
import t, { Test } from 'tap';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { agentRequest, cli, CLI, init, makeHome, startDaemon, eventually, Home } from '../helpers/postern';
import { Tmux } from '../helpers/tmux';
import { prettyLine, prettyValue } from '../../daemon/log-pretty';

const PRETTY =
  /^\d\d:\d\d:\d\d info  daemon started, locked event=daemon_ready home=\S+ agent_socket=\S+ ssh_agent_socket=\S+$/m;
const JSON_READY = /^\{"level":30,"time":"[^"]+","pid":\d+,"name":"postern","event":"daemon_ready"/m;

// An agent's reason that tries everything a terminal obeys: clear screen,
// a title change (OSC ... BEL), an 8-bit CSI, a right-to-left override, and
// a newline and a line separator followed by a forged event.
const HOSTILE = 'ok\u001b[2J\u001b]0;owned\u0007\u009b31m\u202egnp.exe\nforged info  daemon stopped\u2028forged2';

function homeWith(t: Test, daemonTable: string): Home {
  const h = makeHome();
  t.teardown(() => h.cleanup());
  mkdirSync(h.home, { mode: 0o700 });
  writeFileSync(join(h.home, 'config.toml'), `[daemon]\n${daemonTable}\n`, { mode: 0o600 });
  t.equal(init(h).code, 0, 'init');
  return h;
}

function daemonInTmux(t: Test, h: Home): Tmux {
  const tm = Tmux.start([process.execPath, CLI, 'daemon'], { env: h.env, width: 1000, height: 50 });
  t.teardown(() => tm.kill());
  return tm;
}

// Started with stderr on a pipe, stopped with SIGTERM once ready: its log.
async function pipedDaemonLogs(t: Test, h: Home): Promise<string> {
  const d = await startDaemon(h);
  // Its signal handlers are in place once it has said it is ready.
  t.ok(await eventually(() => /daemon_ready/.test(d.logs()), 10_000), 'ready');
  t.equal(await d.stop(), 0);
  return d.logs();
}

t.test('auto on a terminal: one short line per event, hostile values escaped', async (t) => {
  const h = homeWith(t, '');
  const tm = daemonInTmux(t, h);
  await tm.waitFor(PRETTY, 20_000);
  t.equal(cli(h, ['unlock', '--passphrase-file', h.passFile]).code, 0);
  const r = await agentRequest(join(h.home, 'agent.sock'), 'POST', '/v1/http', {
    credential: 'ghost',
    method: 'GET',
    url: 'https://api.example.test/x',
    reason: HOSTILE,
  });
  t.equal(r.status, 404, r.text);
  const screen = await tm.waitFor(/http_refused/);
  t.notMatch(screen, /[{]"level"/, 'no JSON on the terminal');
  const refused = screen.split('\n').filter((l) => l.includes('http_refused'));
  t.equal(refused.length, 1, 'the refusal is one line');
  t.match(
    refused[0],
    /^\d\d:\d\d:\d\d info  http_refused code=unknown_credential peer_pid=\d+ /,
    'time, level, message, then fields',
  );
  t.match(
    refused[0],
    /reason="ok\\u001b\[2J\\u001b\]0;owned\\u0007\\u\{9b\}31m\\u\{202e\}gnp\.exe\\nforged info  daemon stopped\\u\{2028\}forged2"/,
    'the reason is shown escaped, in full',
  );
  t.notMatch(screen, /^forged/m, 'no line starts with the forged text');
  t.match(screen, PRETTY, 'the start line was not cleared from the screen');
  tm.send('C-c');
  await tm.waitFor(/^\d\d:\d\d:\d\d info  daemon_stop reason=SIGINT$/m, 15_000);
});

t.test('auto through a pipe: JSON', async (t) => {
  const logs = await pipedDaemonLogs(t, homeWith(t, ''));
  t.match(logs, JSON_READY);
  t.notMatch(logs, /^\d\d:\d\d:\d\d /m, 'no pretty lines');
});

t.test('log_format = "json" on a terminal: JSON', async (t) => {
  const h = homeWith(t, 'log_format = "json"');
  const tm = daemonInTmux(t, h);
  const screen = await tm.waitFor(/daemon_ready/, 20_000);
  t.match(screen, JSON_READY);
  t.notMatch(screen, PRETTY);
  tm.send('C-c');
  await tm.waitFor(/"kind":"daemon_stop","reason":"SIGINT"/, 15_000);
});

t.test('log_format = "pretty" through a pipe: pretty', async (t) => {
  const logs = await pipedDaemonLogs(t, homeWith(t, 'log_format = "pretty"'));
  t.match(logs, PRETTY);
  t.match(logs, /^\d\d:\d\d:\d\d info  daemon_stop reason=SIGTERM/m);
  t.notMatch(logs, /[{]"level"/);
});

t.test('a bad log_format is refused naming daemon.log_format', async (t) => {
  for (const bad of ['"colour"', '"JSON"', '""', '1', 'true']) {
    const h = makeHome();
    t.teardown(() => h.cleanup());
    mkdirSync(h.home, { mode: 0o700 });
    writeFileSync(join(h.home, 'config.toml'), `[daemon]\nlog_format = ${bad}\n`, { mode: 0o600 });
    const r = cli(h, ['daemon']);
    t.equal(r.code, 1, `${bad}: refused`);
    t.match(r.stderr, /daemon\.log_format/, `${bad}: names the key`);
    t.match(r.stderr, /"auto", "json", "pretty"/, `${bad}: says what is accepted`);
    t.notMatch(r.stderr, /\n\s+at /, 'no stack trace');
    t.equal(r.stderr.trimEnd().split('\n').length, 1, 'one line');
  }
});

t.test('pretty values: bare when plain, quoted and escaped otherwise', async (t) => {
  t.equal(prettyValue('api.example.test'), 'api.example.test');
  t.equal(prettyValue('two words'), '"two words"');
  t.equal(prettyValue('a=b'), '"a=b"');
  t.equal(prettyValue(''), '""');
  t.equal(prettyValue(42), '42');
  t.equal(prettyValue(null), 'null');
  t.equal(prettyValue({ a: ['\u001b'] }), '{"a":["\\u001b"]}');
  t.equal(prettyValue('\u007f\u0085\u200e'), '"\\u{7f}\\u{85}\\u{200e}"');
  const line = prettyLine(
    JSON.stringify({
      level: 50,
      time: '2026-01-02T03:04:05.000Z',
      pid: 1,
      name: 'postern',
      msg: 'bad\nthing\u001b[K',
      'k\u001b': 'v',
    }),
  );
  t.match(line, /^\d\d:\d\d:\d\d error bad\\u\{a\}thing\\u\{1b\}\[K "k\\u001b"=v\n$/);
  t.equal(line.split('\n').length, 2, 'one line');
  t.match(
    prettyLine('not json\u001b[2J\n'),
    /^not json\\u\{1b\}\[2J\n$/,
    'a line that is not JSON is escaped as it is',
  );
});
