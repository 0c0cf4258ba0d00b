// Tool results as the bridge returns them (SPEC §10): the daemon's reply
// once, as structured content, with a short text summary; never larger than
// mcp.max_result serialised. A larger body (or stdout, stderr) is cut there
// and flagged `truncated`, with a note saying how to ask for less. Refusals
// are tool errors carrying the daemon's code and its message, said in an
// MCP agent's words.
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { inReaderWords } from '../../shared/reader-words';
import { formatSize } from '../../shared/units';
import { Cut, fitWithin } from './result-size';

// How one tool's reply is summarised and cut.
export interface Shape {
  // The fields that may be cut, in the order they are cut.
  cut: readonly { name: string; base64: boolean }[];
  summary(reply: Record<string, unknown>): string;
  // How to ask for less, for the note of a cut result.
  advice: string;
}

function cutNote(cuts: Cut[], max: number, advice: string): string {
  const what = cuts.map((c) => `${c.field} cut to ${c.kept} of ${c.of} characters`).join(', ');
  return `${what}: a tool result is at most ${formatSize(max)} (mcp.max_result); ${advice}`;
}

// A result too large even without its body: the request did happen, so the
// agent is told its status and journal entry rather than that it failed.
function tooLarge(reply: Record<string, unknown>, max: number): CallToolResult {
  const known: Record<string, unknown> = {};
  for (const k of ['status', 'exit_code', 'signal', 'audit_seq'] as const)
    if (typeof reply[k] === 'number' || typeof reply[k] === 'string') known[k] = reply[k];
  return toolError(
    {
      code: 'result_too_large',
      message: `the request ran (${JSON.stringify(known)}) but its result does not fit in ${formatSize(max)} (mcp.max_result) even without its body; a human may raise [mcp] max_result in the config (at most 8MiB)`,
      ...known,
    },
    max,
  );
}

export function toolResult(reply: Record<string, unknown>, shape: Shape, max: number): CallToolResult {
  // Base64 is cut on 4-character groups so that what is kept decodes.
  const base64 = reply['body_encoding'] === 'base64' || reply['encoding'] === 'base64';
  const fields = shape.cut.map((f) => ({ ...f, base64 }));
  const fitted = fitWithin(reply, fields, max, (v, cuts): CallToolResult => {
    if (cuts.length === 0) return { content: [{ type: 'text', text: shape.summary(v) }], structuredContent: v };
    const note = cutNote(cuts, max, shape.advice);
    return {
      content: [{ type: 'text', text: `${shape.summary(v)}; ${note}` }],
      structuredContent: { ...v, truncated: true, note },
    };
  });
  return fitted ?? tooLarge(reply, max);
}

// The daemon's refusal (or the bridge's own: daemon_unreachable,
// result_too_large): `code: message` as text, the error as structured
// content.
export function toolError(
  // A daemon's code as it came (a newer daemon may have more), or one of
  // the bridge's own (shared/protocol.ts CLIENT_CODES).
  error: Record<string, unknown> & { code: string; message: string },
  max: number,
): CallToolResult {
  const message = inReaderWords(error.message, 'mcp');
  const render = (e: Record<string, unknown>): CallToolResult => ({
    isError: true,
    content: [{ type: 'text', text: `${error.code}: ${String(e['message'])}` }],
    structuredContent: { error: e },
  });
  // A refusal quotes at most what the agent sent; cut it like a body if it
  // still would not fit.
  return (
    fitWithin({ ...error, message }, [{ name: 'message', base64: false }], max, render) ??
    render({ code: error.code, message: 'the refusal does not fit in mcp.max_result' })
  );
}
