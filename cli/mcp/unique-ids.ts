// MCP forbids a client to reuse a request id within a session, and the SDK
// relies on it: cancellation (notifications/cancelled) names a request by
// id, so a second request under the id of one still running took its place
// and left the first uncancellable, a call waiting at the approver that the
// client could no longer withdraw. The bridge answers such a request at
// once with a JSON-RPC error and never runs it. An id is free again once
// its request was answered; a cancelled request sends no answer and may
// still be finishing, so its id stays taken for the rest of the session.
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

// JSON-RPC 2.0's "Invalid Request".
const INVALID_REQUEST = -32600;

type Id = string | number;

const keyOf = (id: Id): string => `${typeof id}:${id}`;

function requestId(m: JSONRPCMessage): Id | undefined {
  return 'method' in m && 'id' in m ? (m.id as Id) : undefined;
}

function answeredId(m: JSONRPCMessage): Id | undefined {
  return !('method' in m) && 'id' in m && ('result' in m || 'error' in m) ? (m.id as Id) : undefined;
}

// Called after server.connect(transport): filters what reaches the server.
export function refuseReusedIds(transport: Transport): void {
  const deliver = transport.onmessage;
  if (!deliver) throw new Error('refuseReusedIds: connect the server first');
  const taken = new Set<string>();
  const send = transport.send.bind(transport);
  transport.send = (message, options) => {
    const id = answeredId(message);
    if (id !== undefined) taken.delete(keyOf(id));
    return send(message, options);
  };
  transport.onmessage = (message, extra) => {
    const id = requestId(message);
    if (id !== undefined) {
      const key = keyOf(id);
      if (taken.has(key)) {
        void send({
          jsonrpc: '2.0',
          id,
          error: {
            code: INVALID_REQUEST,
            message: `request id ${JSON.stringify(id)} is already in use by a request in progress (or cancelled) in this session; send each request under a new id (MCP forbids reusing one)`,
          },
        }).catch(() => undefined);
        return;
      }
      taken.add(key);
    }
    deliver(message, extra);
  };
}
