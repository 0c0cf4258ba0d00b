// A hostile process inside CMD's tree, with the run's proxy token:
// a placeholder in the request's HOST (CONNECT target, absolute-form URL),
// and agent-API requests (origin-form) sent through `postern run`'s relay.
// A placeholder in the host went out in a DNS query (502 dns_error); the
// agent API reached through the relay answered as `postern run` (a run
// minted, rooted at a process CMD does not own). Both refused now.
import t from 'tap';
import { startRelayStack, cmdRaw } from '../helpers/relay-cmd';
import { auditList } from '../helpers/stack';

const status = (got: string): string => got.split('\r\n')[0] ?? '';

t.test('relay: placeholder in the host; agent API through the relay', async (t) => {
  const p = await startRelayStack();
  t.teardown(() => p.close());
  const ph = p.placeholder;
  t.match(ph, /^postern-github-[0-9a-f]{16}$/, 'control: CMD holds a placeholder');

  await t.test('row host-connect: placeholder as a CONNECT target label', async (t) => {
    const host = `${ph}.example.test`;
    const r = await cmdRaw(
      p,
      [`CONNECT ${host}:443 HTTP/1.1\r\nHost: ${host}:443\r\nProxy-Authorization: @@AUTH@@\r\n\r\n`],
      { ms: 8000 },
    );
    t.comment(JSON.stringify(r.got.slice(0, 600)));
    t.match(status(r.got), /^HTTP\/1.1 400 /, 'refused as bad_request (SPEC §11: a placeholder anywhere else)');
    t.match(r.got, /x-postern-error: bad_request/i, 'x-postern-error bad_request');
    const leaked = p.s.dns.queries.filter((q) => q.name.toLowerCase().includes(ph));
    t.same(
      leaked.map((q) => q.name),
      [],
      'no DNS query carries the placeholder',
    );
  });

  await t.test('row host-absolute: placeholder as an absolute-form URL host label', async (t) => {
    const host = `${ph}.example.test`;
    const r = await cmdRaw(
      p,
      [`GET http://${host}/x HTTP/1.1\r\nHost: ${host}\r\nProxy-Authorization: @@AUTH@@\r\n\r\n`],
      { ms: 8000 },
    );
    t.comment(JSON.stringify(r.got.slice(0, 600)));
    t.match(status(r.got), /^HTTP\/1.1 400 /, 'refused as bad_request');
    t.match(r.got, /x-postern-error: bad_request/i, 'x-postern-error bad_request');
    const leaked = p.s.dns.queries.filter((q) => q.name.toLowerCase().includes(ph));
    t.same(
      leaked.map((q) => q.name),
      [],
      'no DNS query carries the placeholder',
    );
  });

  await t.test('row origin-runs: POST /v1/runs origin-form through the relay', async (t) => {
    const before = auditList(p.s).filter((e) => e['kind'] === 'run_start').length;
    const r = await cmdRaw(
      p,
      [
        `POST /v1/runs HTTP/1.1\r\nHost: postern\r\nProxy-Authorization: @@AUTH@@\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`,
      ],
      { ms: 8000 },
    );
    t.comment(JSON.stringify(r.got.slice(0, 800)));
    t.notMatch(status(r.got), /^HTTP\/1.1 200 /, 'the relay does not pass agent-API calls (not a proxy request)');
    t.notMatch(r.got, /"placeholders"/, 'no placeholders minted through the relay');
    const after = auditList(p.s).filter((e) => e['kind'] === 'run_start');
    t.equal(after.length, before, `no new run (rooted at postern run, pid ${p.runPid}) was opened`);
    t.comment(`postern run pid ${p.runPid}, CMD pid ${p.cmdPid}; last run_start: ${JSON.stringify(after.at(-1))}`);
  });

  await t.test('row origin-credentials: GET /v1/credentials origin-form through the relay', async (t) => {
    const r = await cmdRaw(
      p,
      [`GET /v1/credentials HTTP/1.1\r\nHost: postern\r\nProxy-Authorization: @@AUTH@@\r\n\r\n`],
      { ms: 8000 },
    );
    t.comment(JSON.stringify(r.got.slice(0, 400)));
    t.notMatch(status(r.got), /^HTTP\/1.1 200 /, 'the relay does not pass agent-API calls');
  });
});
