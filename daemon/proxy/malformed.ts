// What the inner HTTP server of a terminated CONNECT says to requests it
// cannot hand to the pipeline: a request line or header the parser rejects,
// a transfer coding that is none, an expectation other than 100-continue,
// a CONNECT.
// Each is a bad_request with postern's JSON, journaled (agent_refused), as
// the agent socket answers malformed HTTP, rather than a closed connection
// or Node's own 417.
import { Refusal } from '../../shared/errors';
import { checkAgentHeaders } from '../pipeline/headers';

// The §6.2 refusal of a header the agent may not send, in its words.
function forbiddenHeader(name: string, value: string): Refusal {
  try {
    checkAgentHeaders([[name, value]]);
  } catch (e) {
    if (e instanceof Refusal) return e;
    throw e;
  }
  return new Refusal('bad_request', `header "${name}" may not be sent; remove it`);
}

// A transfer coding other than chunked cannot frame a request; any other
// parse failure is named by the parser's code.
export function parseFailure(e: NodeJS.ErrnoException): Refusal {
  if (e.code === 'HPE_INVALID_TRANSFER_ENCODING') return forbiddenHeader('transfer-encoding', 'x');
  const why = typeof e.code === 'string' && /^HPE_[A-Z_]+$/.test(e.code) ? ` (${e.code})` : '';
  return new Refusal(
    'bad_request',
    `the request inside the tunnel is not valid HTTP/1.1${why}: header names are tokens, values and the request target visible ASCII without CR, LF or NUL; send a well-formed request`,
  );
}

// `Expect: 100-continue` is answered by the front door itself; any other
// expectation is a header the agent may not send (SPEC §6.2).
export function unmetExpectation(value: string): Refusal {
  return forbiddenHeader('expect', value);
}

// A tunnel reaches its one target: a CONNECT inside it opens nothing.
export function nestedConnect(t: { target: { host: string }; port: number }): Refusal {
  return new Refusal(
    'bad_request',
    `CONNECT inside the tunnel to ${t.target.host}:${t.port} is not served; send the request itself on this connection, or CONNECT to another host on a new proxy connection`,
  );
}
