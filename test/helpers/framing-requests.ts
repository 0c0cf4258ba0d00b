// The request generator of request-framing-fuzz.test.ts (also replayed by
// the reduced rows): one to three HTTP/1.1 requests per case, their framing
// mutated, glued and cut into random segments.
import { Rng, PH, dummyPlaceholder, readRequests, type FuzzCase } from './framing-kit';

export const HOST = 'api.example.test';
export const OTHER = 'other.example.test';
const DUMMY = dummyPlaceholder('api');

// --- The generator ---------------------------------------------------------

interface Built {
  bytes: string; // latin1, with PH for the placeholder
  notes: string[];
}

// With `agent`, the request is a POST /v1/http on the agent socket itself,
// its JSON body asking for GET `agent.url(path)`, mutated the same way.
export function buildRequest(
  rng: Rng,
  caseId: string,
  k: number,
  A: string,
  port: number,
  agent?: { url: (path: string) => string },
): Built {
  const notes: string[] = [];
  const note = (s: string): void => void notes.push(s);
  const path = `/f/${caseId}/${k}${rng.chance(0.2) ? `?q=${rng.word(4)}` : ''}`;
  const method = rng.chance(0.55) || agent ? 'POST' : 'GET';
  let target = agent ? '/v1/http' : path;
  const tf = rng.int(20);
  if (agent) void tf;
  else if (tf === 0) ((target = `https://${HOST}:${port}${path}`), note('absolute'));
  else if (tf === 1) ((target = `https://${OTHER}:${port}${path}`), note('absolute-other'));
  let version = '1.1';
  if (rng.chance(0.08)) ((version = '1.0'), note('http/1.0'));
  const headers: [string, string][] = [];
  const hv = rng.int(24);
  if (hv === 0) note('no-host');
  else if (hv === 1) (headers.push(['Host', `${OTHER}:${port}`]), note('host-other'));
  else if (hv === 2) (headers.push(['Host', HOST]), note('host-no-port'));
  else if (hv === 3) (headers.push(['Host', A], ['Host', A]), note('host-dup'));
  else if (hv === 4) (headers.push(['Host', A.toUpperCase()]), note('host-upper'));
  else if (hv === 5) (headers.push(['Host', `${HOST}.:${port}`]), note('host-dot'));
  else headers.push(['Host', agent ? 'postern' : A]);
  if (agent) headers.push(['Content-Type', 'application/json']);
  else {
    if (rng.chance(0.6)) headers.push(['Authorization', `Bearer ${PH}`]);
    if (rng.chance(0.1)) (headers.push(['X-Token', PH]), note('ph-other-header'));
  }
  // The body.
  let body = '';
  if (method === 'POST' || rng.chance(0.1)) {
    body = agent ? JSON.stringify({ credential: 'api', method: 'GET', url: agent.url(path) }) : rng.word(rng.int(40));
    if (rng.chance(0.2)) {
      const auth = rng.chance(0.5) ? `Authorization: Bearer ${PH}\r\n` : '';
      body += agent
        ? `POST /v1/http HTTP/1.1\r\nHost: postern\r\ncontent-length: ${JSON.stringify({ credential: 'api', method: 'GET', url: agent.url(`/f/${caseId}/s${k}`) }).length}\r\n\r\n${JSON.stringify({ credential: 'api', method: 'GET', url: agent.url(`/f/${caseId}/s${k}`) })}`
        : `GET /f/${caseId}/s${k} HTTP/1.1\r\nHost: ${A}\r\n${auth}\r\n`;
      note('smuggled-in-body');
    }
  }
  const len = (s: string): number => Buffer.byteLength(s.split(PH).join(DUMMY), 'latin1');
  // Framing.
  const framing = body.length === 0 && rng.chance(0.5) ? 'none' : rng.chance(0.62) ? 'cl' : 'chunked';
  let wire = '';
  if (framing === 'cl') {
    let n = len(body);
    const m = rng.int(22);
    const cl = (v: string): void => void headers.push(['Content-Length', v]);
    if (m === 0) (cl(String(n)), cl(String(n)), note('cl-dup-same'));
    else if (m === 1) (cl(String(n)), cl(String(n + 1)), note('cl-dup-diff'));
    else if (m === 2) (cl(`${n}, ${n}`), note('cl-list-same'));
    else if (m === 3) (cl(`${n}, ${n + 2}`), note('cl-list-diff'));
    else if (m === 4) (cl(`+${n}`), note('cl-plus'));
    else if (m === 5) (cl(`00${n}`), note('cl-zeros'));
    else if (m === 6) (cl(`0x${n.toString(16)}`), note('cl-hex'));
    else if (m === 7) (cl(`-${n}`), note('cl-neg'));
    else if (m === 8) (cl('99999999999999999999'), note('cl-huge'));
    else if (m === 9) (cl(''), note('cl-empty'));
    else if (m === 10) (cl(`${n + 1 + rng.int(5)}`), note('cl-longer'));
    else if (m === 11 && n > 0) {
      const cut = 1 + rng.int(Math.min(n, 8));
      cl(String(n - cut));
      note(`cl-shorter-${cut}`);
    } else if (m === 12) (cl(`${n} `.replace(' ', '\t')), note('cl-tab'));
    else if (m === 13) (cl(`${String(n).slice(0, 1)} ${String(n).slice(1)}`), note('cl-inner-space'));
    else if (m === 14) (cl(String(n)), headers.push(['Transfer-Encoding', 'chunked']), note('cl-and-te'));
    else if (m === 15) (headers.push(['content-length ', String(n)]), note('cl-space-before-colon'));
    else cl(String(n));
    n = 0;
    wire = body;
  } else if (framing === 'chunked') {
    const te = rng.int(26);
    const TE: Record<number, string> = {
      0: 'Chunked',
      1: 'CHUNKED',
      2: ' chunked ',
      3: 'chunked,',
      4: ', chunked',
      5: 'gzip, chunked',
      6: 'chunked, gzip',
      7: 'chunked, chunked',
      8: 'identity',
      9: 'chunked\t',
      10: '"chunked"',
      11: 'xchunked',
      12: 'chunked;q=1',
      13: 'identity, chunked',
    };
    if (te in TE) (headers.push(['Transfer-Encoding', TE[te] as string]), note(`te:${JSON.stringify(TE[te])}`));
    else if (te === 14)
      (headers.push(['Transfer-Encoding', 'chunked'], ['Transfer-Encoding', 'chunked']), note('te-dup'));
    else if (te === 15)
      (headers.push(['Transfer-Encoding', 'gzip'], ['Transfer-Encoding', 'chunked']), note('te-two-lines'));
    else if (te === 16) (headers.push(['Transfer-Encoding', '\r\n chunked']), note('te-obsfold'));
    else if (te === 17) (headers.push(['Transfer-Encoding ', 'chunked']), note('te-space-before-colon'));
    else if (te === 18) (headers.push(['Transfer_Encoding', 'chunked']), note('te-underscore'));
    else if (te === 19) (headers.push(['Transfer-Encoding', 'chunked'], ['Content-Length', '0']), note('te-and-cl0'));
    else headers.push(['Transfer-Encoding', 'chunked']);
    // Chunks.
    const parts: string[] = [];
    let rest = body;
    while (rest.length > 0) {
      const take = 1 + rng.int(Math.max(1, Math.min(rest.length, 20)));
      const piece = rest.slice(0, take);
      rest = rest.slice(take);
      let size = len(piece).toString(16);
      let ext = '';
      let eol = '\r\n';
      let after = '\r\n';
      const c = rng.int(30);
      if (c === 0) ((size = `000${size}`), note('chunk-zeros'));
      else if (c === 1) ((size = `0x${size}`), note('chunk-0x'));
      else if (c === 2) ((size = `+${size}`), note('chunk-plus'));
      else if (c === 3) ((size = `-${size}`), note('chunk-minus'));
      else if (c === 4) ((size = size.toUpperCase()), note('chunk-upper'));
      else if (c === 5) ((ext = ';ext'), note('chunk-ext'));
      else if (c === 6) ((ext = ';a="b;c"'), note('chunk-ext-quoted'));
      else if (c === 7) ((ext = ';a="b\rc"'), note('chunk-ext-cr'));
      else if (c === 8) ((ext = ' ;a=b'), note('chunk-ext-bws'));
      else if (c === 9) ((eol = '\n'), note('chunk-bare-lf'));
      else if (c === 10) ((size = 'fffffffffffffffffff'), note('chunk-huge'));
      else if (c === 11) ((size = ` ${size}`), note('chunk-leading-space'));
      else if (c === 12) ((after = ''), note('chunk-no-crlf'));
      else if (c === 13) ((after = '\n'), note('chunk-lf-after'));
      else if (c === 14) ((ext = ';a="\\"x"'), note('chunk-ext-escaped'));
      else if (c === 15) ((ext = `;${PH}`), note('chunk-ext-ph'));
      parts.push(`${size}${ext}${eol}${piece}${after}`);
    }
    let last = '0\r\n';
    let trailer = '';
    const l = rng.int(12);
    if (l === 0) ((last = '000\r\n'), note('last-zeros'));
    else if (l === 1) ((last = '0;x=y\r\n'), note('last-ext'));
    else if (l === 2) ((trailer = 'X-Trailer: yes\r\n'), note('trailer'));
    else if (l === 3) ((trailer = `Authorization: Bearer ${PH}\r\n`), note('trailer-ph'));
    else if (l === 4) ((trailer = 'X-T: a\r\n b\r\n'), note('trailer-obsfold'));
    else if (l === 5) ((last = '0\n'), note('last-bare-lf'));
    else if (l === 6) ((trailer = 'Content-Length: 5\r\n'), note('trailer-cl'));
    wire = `${parts.join('')}${last}${trailer}\r\n`;
  } else wire = body;
  // Other head mutations.
  const more = rng.int(3);
  for (let i = 0; i < more; i++) {
    const h = rng.int(30);
    if (h === 0) (headers.push(['X-A b', 'v']), note('name-space'));
    else if (h === 1) (headers.push(['X-\x00', 'v']), note('name-nul'));
    else if (h === 2) (headers.push(['X-\x7f', 'v']), note('name-del'));
    else if (h === 3) (headers.push(['X-\xff', 'v']), note('name-high'));
    else if (h === 4) (headers.push(['', 'v']), note('name-empty'));
    else if (h === 5) (headers.push(['X_U', 'v']), note('name-underscore'));
    else if (h === 6) (headers.push(['X-V', 'a\x00b']), note('value-nul'));
    else if (h === 7) (headers.push(['X-V', 'a\x7fb']), note('value-del'));
    else if (h === 8) (headers.push(['X-V', 'a\xe9\xffb']), note('value-high'));
    else if (h === 9) (headers.push(['X-V', 'a\rb']), note('value-cr'));
    else if (h === 10) (headers.push(['X-V', 'a\r\n b']), note('value-obsfold'));
    else if (h === 11) {
      const n = 50 + rng.int(250);
      for (let j = 0; j < n; j++) headers.push([`X-Many-${j}`, rng.word(8)]);
      note(`many-headers-${n}`);
    } else if (h === 12) (headers.push(['Expect', '100-continue']), note('expect-100'));
    else if (h === 13) (headers.push(['Expect', '100-Continue']), note('expect-100-case'));
    else if (h === 14) (headers.push(['Expect', 'nothing']), note('expect-other'));
    else if (h === 15) (headers.push(['Connection', 'close']), note('conn-close'));
    else if (h === 16) (headers.push(['Connection', 'keep-alive']), note('conn-keepalive'));
    else if (h === 17) (headers.push(['Upgrade', 'websocket'], ['Connection', 'Upgrade']), note('upgrade'));
    else if (h === 18) (headers.push(['X-Lf', 'v\nY-Inner: w']), note('value-bare-lf'));
    else if (h === 19) (headers.unshift([' X-First', 'v']), note('first-line-fold'));
    else if (h === 20) (headers.push(['Connection', 'content-length']), note('conn-names-cl'));
    else if (h === 21) (headers.push(['Connection', 'transfer-encoding']), note('conn-names-te'));
  }
  let line = `${method} ${target} HTTP/${version}`;
  const r = rng.int(40);
  if (r === 0) ((line = `${method}  ${target} HTTP/${version}`), note('rl-double-space'));
  else if (r === 1) ((line = `${method.toLowerCase()} ${target} HTTP/${version}`), note('rl-lower-method'));
  else if (r === 2) ((line = `${method} ${target} HTTP/1.2`), note('rl-1.2'));
  else if (r === 3) ((line = `${method} ${target}\x00 HTTP/${version}`), note('rl-nul'));
  else if (r === 4) ((line = `${method} ${target} HTTP/${version}\n`), note('rl-bare-lf'));
  else if (r === 5) ((line = `${method} ${target}\xff HTTP/${version}`), note('rl-high'));
  const head = `${line}\r\n${headers.map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`;
  return { bytes: head + wire, notes };
}

export interface Gen {
  c: FuzzCase;
  bytes: Buffer; // with the dummy placeholder
  notes: string[];
}

export function generate(
  rng: Rng,
  caseId: string,
  A: string,
  port: number,
  agent?: { url: (path: string) => string },
): Gen {
  const n = 1 + rng.int(3);
  const built = Array.from({ length: n }, (_v, k) => buildRequest(rng, caseId, k, A, port, agent));
  let text = built.map((b) => b.bytes).join('');
  if (rng.chance(0.06))
    ((text += `GET /f/${caseId}/tail HTTP/1.1\r\nHost: ${agent ? 'postern' : A}\r\n`),
      built[0]!.notes.push('tail-cut'));
  const bytes = Buffer.from(text.split(PH).join(DUMMY), 'latin1');
  const writes: FuzzCase['writes'] = [];
  const cuts = rng.int(3);
  const points = Array.from({ length: cuts }, () => rng.int(bytes.length))
    .sort((a, b) => a - b)
    .filter((p, i, xs) => p > 0 && xs.indexOf(p) === i);
  let from = 0;
  for (const p of [...points, bytes.length]) {
    writes.push({ data: bytes.subarray(from, p).toString('base64'), delay: from === 0 ? 0 : rng.int(30) });
    from = p;
  }
  const ref = readRequests(bytes);
  const expect = ref.requests.length + (ref.stop.kind === 'error' || ref.stop.kind === 'incomplete' ? 1 : 0);
  return {
    c: { id: caseId, connect: A, writes, expect, idle: 3500 },
    bytes,
    notes: built.flatMap((b, i) => b.notes.map((x) => `${i}:${x}`)),
  };
}
