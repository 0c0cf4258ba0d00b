// The daemon's refusals name the next step for a client of the agent socket
// ("GET /v1/credentials lists them"). A person at the CLI and an MCP agent
// read them through a client that knows its reader (SPEC §5): each phrase is
// said again in that reader's words.
export type Reader = 'socket' | 'cli' | 'mcp';

// [what the daemon says, what a person types, what an MCP agent calls]
const PHRASES: readonly (readonly [RegExp, string, string])[] = [
  [/GET \/v1\/credentials/g, '`postern cred list`', 'the list_credentials tool'],
  [/POST \/v1\/http/g, '`postern request http`', 'the http_request tool'],
  [/POST \/v1\/ssh/g, '`postern request ssh`', 'the ssh_exec tool'],
];

export function inReaderWords(message: string, reader: Reader): string {
  if (reader === 'socket') return message;
  let out = message;
  for (const [said, cli, mcp] of PHRASES) out = out.replace(said, reader === 'cli' ? cli : mcp);
  return out;
}
