// The MCP bridge (SPEC §10): an MCP server whose tools forward to the agent
// socket. It holds no secret and decides nothing: the daemon sees the
// bridge as the requesting process (its card shows the bridge and its
// parent chain, so a human can root a session at the agent that started
// it), and every refusal comes back as a tool error with the daemon's code
// and message.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { Unreachable } from '../errors';
import { inReaderWords } from '../../shared/reader-words';

// One call to the agent socket: status and parsed JSON.
export type AgentCall = (method: string, path: string, body?: unknown) => Promise<{ status: number; json: Record<string, unknown> }>;

// Actions on the world: not read-only, may destroy, not idempotent,
// open-world (the tool reaches systems beyond postern).
const ACTS = { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true } as const;

function toResult(r: { status: number; json: Record<string, unknown> }, summary: (j: Record<string, unknown>) => string): CallToolResult {
  if (r.status !== 200) {
    const err = (r.json['error'] ?? {}) as Record<string, unknown>;
    const code = String(err['code'] ?? 'error');
    const message = inReaderWords(String(err['message'] ?? 'postern refused the request'), 'mcp');
    return { isError: true, content: [{ type: 'text', text: `${code}: ${message}` }], structuredContent: { error: { ...err, message } } };
  }
  return { content: [{ type: 'text', text: summary(r.json) }, { type: 'text', text: JSON.stringify(r.json) }], structuredContent: r.json };
}

// The daemon may be down or locked: that is a tool error too, never a crash.
async function forward(call: AgentCall, method: string, path: string, body: unknown, summary: (j: Record<string, unknown>) => string): Promise<CallToolResult> {
  try {
    return toResult(await call(method, path, body), summary);
  } catch (e) {
    const message = e instanceof Error ? e.message : 'the postern daemon is not reachable';
    const maybe = e instanceof Unreachable && e.maybeExecuted ? { maybe_executed: true } : {};
    return { isError: true, content: [{ type: 'text', text: `daemon_unreachable: ${message}` }], structuredContent: { error: { code: 'daemon_unreachable', message, ...maybe } } };
  }
}

export function createBridge(call: AgentCall, version: string): McpServer {
  const server = new McpServer({ name: 'postern', version });

  server.registerTool('list_credentials', {
    title: 'List postern credentials',
    description: 'The credentials postern can use for you: names, kinds, descriptions and the targets each may reach. Secrets are never shown; seeing a credential does not mean a request with it will be approved.',
    inputSchema: {},
    annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  }, () => forward(call, 'GET', '/v1/credentials', undefined, (j) => {
    const list = (j['credentials'] ?? []) as Record<string, unknown>[];
    return list.length === 0 ? 'no credentials' : list.map((c) => `${String(c['name'])} (${String(c['kind'])}): ${String(c['description'] ?? '')}`).join('\n');
  }));

  server.registerTool('http_request', {
    title: 'HTTP request with a postern credential',
    description: 'Performs an HTTP request; postern injects the named credential\'s secret, which you never see. A human may have to approve it. Redirects are returned, not followed. Refusals say why and what to do next.',
    inputSchema: {
      credential: z.string().describe('the credential name, from list_credentials'),
      method: z.string().describe('HTTP method, e.g. GET or POST'),
      url: z.string().describe('absolute http(s) URL'),
      headers: z.record(z.string(), z.string()).optional().describe('request headers (never Authorization or the header the credential injects)'),
      body: z.string().optional().describe('request body as UTF-8 text'),
      body_base64: z.string().optional().describe('request body as base64 (instead of body)'),
      timeout_ms: z.number().int().positive().optional().describe('time limit after approval, in milliseconds'),
      idempotency_key: z.string().optional().describe('the same key with the same request returns the recorded outcome instead of sending again'),
    },
    annotations: ACTS,
  }, (args) => forward(call, 'POST', '/v1/http', args, (j) => `HTTP ${String(j['status'])} (audit #${String(j['audit_seq'])})${j['truncated'] ? ', truncated' : ''}${Number(j['redactions']) > 0 ? `, ${String(j['redactions'])} redactions` : ''}`));

  server.registerTool('ssh_exec', {
    title: 'SSH command with a postern credential',
    description: 'Runs one command over SSH with the named credential (exec only: no shell session). The command must match the credential\'s rules exactly or as a prefix followed by plain words. A human may have to approve it.',
    inputSchema: {
      credential: z.string().describe('the credential name, from list_credentials'),
      command: z.string().describe('the command line, as the credential\'s rules allow it'),
      stdin: z.string().optional().describe('standard input as UTF-8 text, where the credential allows it'),
      stdin_base64: z.string().optional().describe('standard input as base64 (instead of stdin)'),
      timeout_ms: z.number().int().positive().optional().describe('time limit after approval, in milliseconds'),
    },
    annotations: ACTS,
  }, (args) => forward(call, 'POST', '/v1/ssh', args, (j) => `${j['signal'] ? `signal ${String(j['signal'])}` : `exit ${String(j['exit_code'])}`} (audit #${String(j['audit_seq'])})${j['truncated'] ? ', truncated' : ''}`));

  return server;
}
