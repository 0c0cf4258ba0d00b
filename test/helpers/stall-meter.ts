// How long the daemon's main thread keeps others waiting: GET /v1/health
// polled on the agent socket until stop(), which gives the slowest answer
// (ms) and counts the polls that failed.
import { agentRequest } from './postern';

export function stallMeter(sock: string, everyMs = 20): { stop(): Promise<number> } {
  let worst = 0;
  let failed = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      const t0 = Date.now();
      await agentRequest(sock, 'GET', '/v1/health').catch(() => (failed += 1));
      worst = Math.max(worst, Date.now() - t0);
      await new Promise((r) => setTimeout(r, everyMs));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      if (failed > 0) console.error(`# health polls that failed: ${failed}`);
      return worst;
    },
  };
}
