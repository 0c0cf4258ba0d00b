// One list of codes (shared/protocol.ts): every code the CLI or the MCP
// bridge can show is either the daemon's (REFUSALS) or one of the clients'
// own (CLIENT_CODES), and the two lists do not overlap.
import t from 'tap';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { CLIENT_CODES, REFUSALS, REFUSAL_TABLE } from '../../shared/protocol';
import { ROOT } from '../helpers/postern';

function* sources(dir: string): Generator<string> {
  for (const e of readdirSync(dir)) {
    const p = join(dir, e);
    if (statSync(p).isDirectory()) yield* sources(p);
    else if (p.endsWith('.ts')) yield p;
  }
}

t.test("the daemon's codes and the clients' do not overlap", async (t) => {
  t.same(
    Object.keys(CLIENT_CODES).filter((c) => c in REFUSALS),
    [],
  );
});

t.test('every code the CLI and the bridge write is in one of the lists', async (t) => {
  const found = new Map<string, string>();
  for (const file of sources(join(ROOT, 'cli'))) {
    const text = readFileSync(file, 'utf8');
    // `code: 'x'` in an error object, and codeOf()'s `return 'x'`.
    for (const m of text.matchAll(/\bcode: '([a-z_]+)'/g)) found.set(m[1]!, file);
    const codeOf = /export function codeOf[\s\S]*?\n}/.exec(text);
    if (codeOf) for (const m of codeOf[0].matchAll(/return '([a-z_]+)'/g)) found.set(m[1]!, file);
  }
  t.ok(found.size >= 5, `codes found in cli/: ${[...found.keys()].join(', ')}`);
  for (const [code, file] of found)
    t.ok(code in REFUSALS || code in CLIENT_CODES, `${code} (${file.slice(ROOT.length + 1)}) is in shared/protocol.ts`);
  for (const code of Object.keys(CLIENT_CODES)) t.ok(found.has(code), `${code} is used by a client`);
});

// The table's audience column holds for the code that throws: what the
// request path refuses with reaches agents, what the admin actions refuse
// with reaches the CLI and approvers.
t.test('each refusal is thrown only where its audience can receive it', async (t) => {
  const sides: [string[], 'agent' | 'admin'][] = [
    [['daemon/pipeline', 'daemon/stores', 'daemon/identity', 'daemon/sessions', 'daemon/agent-server.ts'], 'agent'],
    [['daemon/admin', 'daemon/admin-server.ts'], 'admin'],
  ];
  for (const [places, audience] of sides) {
    const files = places.flatMap((p) => (p.endsWith('.ts') ? [join(ROOT, p)] : [...sources(join(ROOT, p))]));
    const codes = new Set<string>();
    for (const f of files)
      for (const m of readFileSync(f, 'utf8').matchAll(/new Refusal\(\s*'([a-z_]+)'/g)) codes.add(m[1]!);
    t.ok(codes.size >= 5, `${audience} side: ${[...codes].join(', ')}`);
    for (const code of codes) {
      const row = REFUSAL_TABLE[code as keyof typeof REFUSAL_TABLE];
      t.ok(row && (row.audience === audience || row.audience === 'both'), `${code} may reach the ${audience} side`);
    }
  }
  for (const [code, row] of Object.entries(REFUSAL_TABLE)) t.ok(row.when.length > 10, `${code} says when it is given`);
});
