// Progress while a call waits for a human (SPEC §10), with the official MCP
// SDK client against a real daemon, approver connection and HTTPS
// upstream: a client whose timeout is 5 s and that resets it on progress
// keeps waiting through an approval given after 12 s, and is told, at least
// every 10 s, that a human is being asked; the request then runs once.
import t from 'tap';
import { startStack, Card } from '../helpers/stack';
import { connectSdkBridge } from '../helpers/mcp-bridge';
import { eventually } from '../helpers/postern';
import { findCanary, makeCanary } from '../helpers/canary';

t.test('a 5 s client timeout, reset on progress, outlasts a 12 s approval', async (t) => {
  const s = await startStack();
  t.teardown(() => s.close());
  const secret = makeCanary('MCPWAIT');
  s.addCredential(
    'api',
    `name = "api"\ndescription = "the test API"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "Authorization"\ntemplate = "Bearer {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${s.up.port}]\nmethods = ["POST"]\npaths = ["/v1/*"]\n`,
    secret,
  );
  const cards: Card[] = [];
  const admin = await s.approver((card) => {
    cards.push(card);
    return null; // decided below, late
  });
  const b = await connectSdkBridge(t, s.h.env);

  const progress: { at: number; message?: string; progress: number }[] = [];
  const started = Date.now();
  const call = b.client
    .callTool(
      {
        name: 'http_request',
        arguments: {
          credential: 'api',
          method: 'POST',
          url: s.url('api.example.test', '/v1/slow-approval'),
          body: 'x',
        },
      },
      undefined,
      {
        timeout: 5000,
        resetTimeoutOnProgress: true,
        onprogress: (p) => progress.push({ at: Date.now(), message: p.message, progress: p.progress }),
      },
    )
    .then(
      (r) => ({ r }),
      (e: Error) => ({ e }),
    );

  t.ok(await eventually(() => cards.length === 1, 10_000), 'the card is pending');
  await new Promise((r) => setTimeout(r, 12_000 - (Date.now() - started)));
  const decidedAt = Date.now();
  const decided = await admin.request('approval.decide', { id: cards[0]!.id, decision: 'once' });
  t.equal(
    (decided['result'] as Record<string, unknown> | undefined)?.['taken'],
    true,
    `approved after ${Date.now() - started} ms`,
  );

  const outcome = await call;
  t.notOk('e' in outcome, `the client kept waiting (${'e' in outcome ? outcome.e.message : ''})`);
  if ('r' in outcome) {
    t.notOk(outcome.r.isError, JSON.stringify(outcome.r).slice(0, 300));
    t.match(outcome.r.structuredContent, { status: 200 });
  }
  t.equal(s.up.requests.filter((q) => q.url === '/v1/slow-approval').length, 1, 'the request ran once');

  t.ok(progress.length >= 5, `${progress.length} progress notifications over 12 s`);
  const gaps = progress.map((p, i) => p.at - (i === 0 ? started : progress[i - 1]!.at));
  t.ok(
    Math.max(...gaps) < 10_000,
    `at most ${Math.max(...gaps)} ms apart (under 10 s, and short enough for a 5 s timeout)`,
  );
  // Those before the decision; any after it say it was approved
  // (progress-after-approval.test.ts).
  const waiting = progress.filter((p) => p.at < decidedAt);
  t.ok(
    waiting.every((p) => /a human is being asked/.test(p.message ?? '')),
    'each before the decision says a human is being asked',
  );
  t.ok(
    waiting.every((p) => (p.message ?? '').includes(`(${cards[0]!.id})`) && / expires at \d{4}-/.test(p.message ?? '')),
    'naming the card the approver shows, and when it expires',
  );
  t.ok(
    progress.every((p, i) => i === 0 || p.progress > progress[i - 1]!.progress),
    'progress increases',
  );
  t.same(findCanary(b.stdout(), secret), [], 'nothing the bridge wrote holds a form of the secret');
});
