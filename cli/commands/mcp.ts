// `postern mcp`: the MCP bridge on stdio (SPEC §10). stdout carries MCP
// messages only; the bridge exits when its stdin closes.
import { Command } from 'commander';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { Context } from '../context';
import { createBridge } from '../mcp/bridge';
import { agentCall, agentSocketPath } from '../agent-client';
import { packageVersion } from '../../shared/version';

type Ctx = () => Context;

export function register(program: Command, ctx: Ctx): void {
  program
    .command('mcp')
    .description('serve MCP on stdio: tools list_credentials, http_request and ssh_exec, forwarded to the agent socket')
    .action(async () => {
      const c = ctx();
      c.harden('mcp');
      const socket = agentSocketPath(c.env, () => c.config().paths.agentSocket);
      const version = packageVersion();
      // Calls still running when stdin closes are answered before exit.
      let running = 0;
      let idle: () => void = () => undefined;
      const server = createBridge(async (method, path, body) => {
        running += 1;
        try {
          return await agentCall(socket, method, path, body);
        } finally {
          running -= 1;
          if (running === 0) idle();
        }
      }, version);
      const transport = new StdioServerTransport();
      const done = new Promise<void>((resolve) => {
        process.stdin.once('end', resolve);
        process.stdin.once('close', resolve);
      });
      await server.connect(transport);
      await done;
      // Let the request that arrived with the last line start its call.
      await new Promise((r) => setImmediate(r));
      if (running > 0) await new Promise<void>((r) => (idle = r));
      await new Promise((r) => setImmediate(r));
      await server.close().catch(() => undefined);
      process.exit(0);
    });
}
