// The MCP bridge (SPEC §10): an MCP server whose tools forward to the agent
// socket. It holds no secret and decides nothing: the daemon sees the
// bridge as the requesting process (its card shows the bridge and its
// parent chain, so a human can root a session at the agent that started
// it), and every refusal comes back as a tool error with the daemon's code
// and message, said in an MCP agent's words.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { Aborted } from '../agent-client';
import { Unreachable } from '../errors';
import { CallPhase, reportWaiting, ToolExtra } from './progress';
import type { ApprovalNotice } from '../../shared/protocol';
import { toolError, toolResult, Shape } from './results';

// One call to the agent socket: status and parsed JSON. Aborting `signal`
// closes the connection, which withdraws a request still waiting for
// approval (SPEC §6.1).
export type AgentCall = (
  method: string,
  path: string,
  body: unknown,
  signal: AbortSignal,
  onWaiting: (approval: ApprovalNotice) => void,
  onHeard: () => void,
) => Promise<{ status: number; json: Record<string, unknown> }>;

export interface BridgeOptions {
  version: string;
  maxResult: number; // mcp.max_result, bytes
}

// Actions on the world: not read-only, may destroy, not idempotent,
// open-world (the tool reaches systems beyond postern).
const ACTS = { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true } as const;

export const INSTRUCTIONS = [
  'postern makes HTTP requests and runs SSH commands for you with credentials it keeps; you never see a secret, postern injects it.',
  'Call list_credentials first: it names the credentials you can use, their kinds, and the hosts or commands each may reach. Use one of those names with http_request or ssh_exec.',
  'A human may have to approve a request at the postern approver before it runs, so a call can wait for minutes; give a short `reason` (at most 200 characters) saying why you need it: the human sees it on the approval card.',
  'A refused call is a tool error with a code and a message that says what to do next; follow it, and do not retry a denied request unchanged.',
  'Results are capped: a larger body is cut and flagged `truncated`, with a note; then ask for less (a Range header, a smaller page, a filter, a narrower command).',
].join('\n');

const REASON = z
  .string()
  .optional()
  .describe('why you need this, in a sentence (at most 200 characters): shown to the human who approves it');

// The daemon may be down or locked, or the client may cancel: each is a tool
// error, never a crash.
async function forward(
  call: AgentCall,
  o: BridgeOptions,
  extra: ToolExtra,
  method: string,
  path: string,
  body: unknown,
  shape: Shape,
): Promise<CallToolResult> {
  const phase: CallPhase = { approval: null, heardAt: Date.now() };
  const stop = reportWaiting(extra, phase);
  try {
    const r = await call(
      method,
      path,
      body,
      extra.signal,
      (approval) => (phase.approval = approval),
      () => (phase.heardAt = Date.now()),
    );
    if (r.status === 200) return toolResult(r.json, shape, o.maxResult);
    const err = (r.json['error'] ?? {}) as Record<string, unknown>;
    return toolError(
      {
        ...err,
        code: String(err['code'] ?? 'error'),
        message: String(err['message'] ?? 'postern refused the request'),
      },
      o.maxResult,
    );
  } catch (e) {
    // Nobody reads the answer to a cancelled call; it is withdrawn.
    if (e instanceof Aborted)
      return toolError(
        { code: 'cancelled', message: 'the call was cancelled; the request was withdrawn' },
        o.maxResult,
      );
    const message = e instanceof Error ? e.message : 'the postern daemon is not reachable';
    const maybe = e instanceof Unreachable && e.maybeExecuted ? { maybe_executed: true } : {};
    return toolError({ code: 'daemon_unreachable', message, ...maybe }, o.maxResult);
  } finally {
    stop();
  }
}

const LIST: Shape = {
  cut: [],
  summary: (j) => {
    const list = (j['credentials'] ?? []) as Record<string, unknown>[];
    return list.length === 0
      ? 'no credentials'
      : list.map((c) => `${String(c['name'])} (${String(c['kind'])}): ${String(c['description'] ?? '')}`).join('\n');
  },
  advice: 'ask the human to describe fewer credentials',
};

const HTTP: Shape = {
  cut: [{ name: 'body', base64: false }],
  summary: (j) =>
    `HTTP ${String(j['status'])} (audit #${String(j['audit_seq'])}), ${String(j['body'] ?? '').length} characters of body (${String(j['body_encoding'])}) in the structured content${j['truncated'] ? ', truncated' : ''}${Number(j['redactions']) > 0 ? `, ${String(j['redactions'])} redactions` : ''}`,
  advice:
    'ask for less: a Range header, a smaller page (a limit or per_page query parameter), a filter, or HEAD for the headers only',
};

const SSH: Shape = {
  cut: [
    { name: 'stdout', base64: false },
    { name: 'stderr', base64: false },
  ],
  summary: (j) =>
    `${j['signal'] ? `signal ${String(j['signal'])}` : `exit ${String(j['exit_code'])}`} (audit #${String(j['audit_seq'])}), ${String(j['stdout'] ?? '').length} characters of stdout and ${String(j['stderr'] ?? '').length} of stderr (${String(j['encoding'])}) in the structured content${j['truncated'] ? ', truncated' : ''}`,
  advice: 'ask for less: a command that prints less (head, tail, grep, a filter or limit option)',
};

// A header named `__proto__` is dropped by zod when it builds the record:
// refused here, as §6.2 refuses a header it will not send, never lost.
function refuseProtoKey(v: unknown, ctx: { addIssue(message: string): void }): unknown {
  if (v !== null && typeof v === 'object' && Object.prototype.hasOwnProperty.call(v, '__proto__'))
    ctx.addIssue(
      'a header named __proto__ cannot be sent through the bridge; remove it, or send it with postern request',
    );
  return v;
}

export function createBridge(call: AgentCall, o: BridgeOptions): McpServer {
  const server = new McpServer({ name: 'postern', version: o.version }, { instructions: INSTRUCTIONS });

  server.registerTool(
    'list_credentials',
    {
      title: 'List postern credentials',
      description:
        'The credentials postern can use for you: names, kinds, descriptions and the targets each may reach. Secrets are never shown; seeing a credential does not mean a request with it will be approved.',
      inputSchema: {},
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    (_args, extra) => forward(call, o, extra, 'GET', '/v1/credentials', undefined, LIST),
  );

  server.registerTool(
    'http_request',
    {
      title: 'HTTP request with a postern credential',
      description:
        "Performs an HTTP request; postern injects the named credential's secret, which you never see. A human may have to approve it, so the call may wait. Redirects are returned, not followed. The response is in the structured content (status, headers, body, truncated). Refusals say why and what to do next.",
      inputSchema: {
        credential: z.string().describe('the credential name, from list_credentials'),
        method: z.string().describe('HTTP method, e.g. GET or POST'),
        url: z.string().describe('absolute http(s) URL'),
        headers: z
          .preprocess(refuseProtoKey, z.record(z.string(), z.string()))
          .optional()
          .describe('request headers (never Authorization or the header the credential injects)'),
        body: z.string().optional().describe('request body as UTF-8 text'),
        body_base64: z.string().optional().describe('request body as base64 (instead of body)'),
        timeout_ms: z.number().int().positive().optional().describe('time limit after approval, in milliseconds'),
        idempotency_key: z
          .string()
          .optional()
          .describe('the same key with the same request returns the recorded outcome instead of sending again'),
        reason: REASON,
      },
      annotations: ACTS,
    },
    (args, extra) => forward(call, o, extra, 'POST', '/v1/http', args, HTTP),
  );

  server.registerTool(
    'ssh_exec',
    {
      title: 'SSH command with a postern credential',
      description:
        "Runs one command over SSH with the named credential (exec only: no shell session). The command must match the credential's rules exactly or as a prefix followed by plain words. A human may have to approve it, so the call may wait. Output is in the structured content (exit_code, stdout, stderr, truncated).",
      inputSchema: {
        credential: z.string().describe('the credential name, from list_credentials'),
        command: z.string().describe("the command line, as the credential's rules allow it"),
        stdin: z.string().optional().describe('standard input as UTF-8 text, where the credential allows it'),
        stdin_base64: z.string().optional().describe('standard input as base64 (instead of stdin)'),
        timeout_ms: z.number().int().positive().optional().describe('time limit after approval, in milliseconds'),
        reason: REASON,
      },
      annotations: ACTS,
    },
    (args, extra) => forward(call, o, extra, 'POST', '/v1/ssh', args, SSH),
  );

  return server;
}
