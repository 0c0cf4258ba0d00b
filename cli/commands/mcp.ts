// `postern mcp`: the MCP bridge on stdio (SPEC §10). stdout carries MCP
// messages only; the bridge exits when its stdin closes.
import { Command } from 'commander';
import { Context } from '../context';
import { agentCall, agentSocketPath } from '../agent-client';
import { packageVersion } from '../../shared/version';

type Ctx = () => Context;

export function register(program: Command, ctx: Ctx): void {
  program
    .command('mcp')
    .description('serve MCP on stdio: tools list_credentials, http_request and ssh_exec, forwarded to the agent socket')
    .action(async () => {
      // The MCP SDK (with its schema validators) is loaded by this command
      // alone: every other one, the daemon included, starts without it.
      const { StdioServerTransport } =
        require('@modelcontextprotocol/sdk/server/stdio.js') as typeof import('@modelcontextprotocol/sdk/server/stdio.js');
      const { createBridge } = require('../mcp/bridge') as typeof import('../mcp/bridge');
      const { refuseReusedIds } = require('../mcp/unique-ids') as typeof import('../mcp/unique-ids');
      const c = ctx();
      c.harden('mcp');
      const socket = agentSocketPath(c.env, () => c.config().paths.agentSocket);
      // With POSTERN_AGENT_SOCKET set, a missing config file means defaults.
      const maxResult = c.config(true).config.mcp.max_result;
      // stdin closing means the client is gone: its calls still waiting are
      // withdrawn, as a cancelled call is (SPEC §10), not left to run.
      const clientGone = new AbortController();
      const server = createBridge(
        (method, path, body, signal, onWaiting, onHeard) =>
          agentCall(socket, method, path, body, {
            signal: AbortSignal.any([signal, clientGone.signal]),
            onWaiting,
            onHeard,
          }),
        { version: packageVersion(), maxResult },
      );
      // A call line of 16 MiB, or what the daemon reads of a body if more
      // (JSON escapes take up to 6 bytes a byte): a body somewhat over the
      // limit gets the daemon's 413 body_too_large as a tool error rather
      // than ending the session (the SDK's own limit is 10 MiB a line;
      // beyond the limit the transport closes). Not more: the SDK joins its
      // whole buffer at every chunk, so a line costs the square of its size.
      const maxBody = c.config(true).config.http.max_request_body;
      const transport = new StdioServerTransport(process.stdin, process.stdout, {
        maxBufferSize: Math.max(16 * 1024 * 1024, maxBody * 6 + 1024 * 1024),
      });
      transport.onerror = (e) => process.stderr.write(`postern mcp: ${e.message}\n`);
      const done = new Promise<void>((resolve) => {
        process.stdin.once('end', resolve);
        process.stdin.once('close', resolve);
      });
      await server.connect(transport);
      refuseReusedIds(transport);
      await done;
      clientGone.abort();
      // A call that arrived with the last line starts (already withdrawn)
      // before the bridge goes.
      await new Promise((r) => setImmediate(r));
      await server.close().catch(() => undefined);
      process.exit(0);
    });
}
