import { Agent } from 'undici';

/**
 * The same-run baseline: a bare undici POST loop, `concurrency` requests in flight over
 * keep-alive connections, to the same receiver, with a body of the same size as a delivery's
 * — HTTP alone, no database, no signing. `cpuUsPerRequest`: this process's CPU per request (the
 * client's cost, to set beside the dispatcher's per delivery).
 */
export async function rawPostLoop(url: string, body: string, total: number, concurrency: number): Promise<{ ms: number; ok: number; cpuUsPerRequest: number }> {
  const agent = new Agent({ connections: concurrency, pipelining: 1, keepAliveTimeout: 10_000 });
  const u = new URL(url);
  let next = 0;
  let ok = 0;
  const started = performance.now();
  const cpu = process.cpuUsage();
  const worker = async () => {
    while (next < total) {
      const i = next++;
      const res = await agent.request({
        origin: u.origin,
        path: u.pathname,
        method: 'POST',
        headers: { 'content-type': 'application/json', 'webhook-id': `raw_${i}` },
        body,
      });
      await res.body.dump();
      if (res.statusCode >= 200 && res.statusCode < 300) ok += 1;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const ms = performance.now() - started;
  const used = process.cpuUsage(cpu);
  await agent.close();
  return { ms, ok, cpuUsPerRequest: (used.user + used.system) / Math.max(1, total) };
}
