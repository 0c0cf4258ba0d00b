// Fields of POST /v1/http that the agent controls, through the real
// daemon. The agent socket reads a JSON body of up to max_request_body * 6 +
// 64 KiB (≈ 6.3 MB by default), and every field is checked before the body
// size is judged. Found and fixed: `body_base64` of ~4.5 M characters and
// more overflowed V8's regexp stack (a repeated group of four kept a
// backtrack entry each): 500 internal_error instead of 413 body_too_large;
// a too-long `reason` was spread into an array of code points (~300 ms)
// before it was refused. A host of distinct non-ASCII characters (punycode,
// quadratic in isolation) is bounded by the 16 KiB URL limit; its times are
// printed. Times are printed, not asserted (test/pipeline/complexity has
// the bounded rows).
import t from 'tap';
import { stallMeter } from '../helpers/stall-meter';
import { startStack } from '../helpers/stack';
import { agentRequest } from '../helpers/postern';

t.test('agent-controlled fields of POST /v1/http', async (t) => {
  const s = await startStack();
  t.teardown(() => s.close());
  const P = s.up.port;
  s.addCredential(
    'api',
    `name = "api"\nkind = "http"\nallow_addresses = ["127.0.0.1/32"]\n[inject]\nheader = "X-Api-Key"\ntemplate = "Key {secret}"\n[[allow]]\nhost = "api.example.test"\nports = [${P}]\nmethods = ["GET", "POST"]\n`,
    'agent-fields-secret-value-0123456789',
  );
  const base = { credential: 'api', method: 'POST', url: s.url('api.example.test', '/x') };

  const timed = async (what: string, body: unknown) => {
    const meter = stallMeter(s.sock);
    const t0 = Date.now();
    const r = await agentRequest(s.sock, 'POST', '/v1/http', body);
    const ms = Date.now() - t0;
    const stall = await meter.stop();
    const code = (r.json as { error?: { code?: string; message?: string } } | null)?.error;
    t.comment(
      `${what}: ${ms} ms (health worst ${stall} ms) → ${r.status} ${code?.code ?? ''} ${(code?.message ?? '').slice(0, 120)}`,
    );
    return { ms, stall, status: r.status, code: code?.code, message: code?.message ?? '' };
  };

  t.test('reason: a multi-megabyte reason of non-ASCII characters', async (t) => {
    const out: Record<string, number> = {};
    for (const chars of [512 * 1024, 1024 * 1024, 2 * 1024 * 1024]) {
      // Control: the same text as `body` (refused as too large, after the
      // same JSON parse and a well-formedness check).
      const c = await timed(`body of ${chars} "€" (control)`, { ...base, body: '€'.repeat(chars) });
      const r = await timed(`reason of ${chars} "€"`, { ...base, reason: '€'.repeat(chars) });
      t.equal(r.status, 400, 'the reason is refused');
      out[`c${chars}`] = c.ms;
      out[`r${chars}`] = r.ms;
    }
    t.comment(
      `a too-long reason costs ${out[`r${2 * 1024 * 1024}`]! - out[`c${2 * 1024 * 1024}`]!} ms more than the same bytes as a body`,
    );
  });

  t.test('body_base64 near the agent socket limit', async (t) => {
    for (const chars of [2 << 20, 4 << 20, 5 << 20, 6 << 20]) {
      const r = await timed(`body_base64 of ${chars} chars`, { ...base, body_base64: 'A'.repeat(chars) });
      // Over max_request_body (1 MiB) the right answer is 413 body_too_large.
      t.equal(r.code, 'body_too_large', `${chars} chars: body_too_large (got ${r.status} ${r.code})`);
    }
    const lines = s.d
      .logs()
      .split('\n')
      .filter((l) => /internal_error|call stack|RangeError/.test(l));
    t.same(lines, [], 'no internal error in the daemon log');
  });

  t.test('url: a host label of distinct non-ASCII characters (punycode)', async (t) => {
    const out: number[] = [];
    const sizes = [1200, 2400, 4800, 5300];
    for (const n of sizes) {
      let label = '';
      for (let i = 0; i < n; i++) label += String.fromCodePoint(0x4e00 + i);
      const url = `https://${label}.example.test/x`;
      // Warm-up first (the refused host is never cached, so each is fresh).
      const r = await timed(`host of ${n} distinct CJK characters (${Buffer.byteLength(url)} URL bytes)`, {
        ...base,
        url,
      });
      t.equal(r.status, 400, 'refused');
      out.push(r.ms);
    }
    const ratio = out[2]! / Math.max(1, out[0]!);
    t.comment(`1200 → 4800 characters cost ratio: ${ratio.toFixed(2)} (linear ≈ 4, quadratic ≈ 16)`);
    t.comment(`the largest host the URL limit allows cost ${out[3]} ms`);
  });
});
