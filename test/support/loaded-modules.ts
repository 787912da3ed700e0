import { register } from 'node:module';
import { MessageChannel } from 'node:worker_threads';

/**
 * Records the URL of every module this process loads from now on, through Node's module
 * hooks (which run on their own thread and report here over a message port). `settle()`
 * returns them all once everything loaded before the call has been reported.
 */
export function recordLoadedModules(): { settle: () => Promise<string[]> } {
  const { port1, port2 } = new MessageChannel();
  const loaded: string[] = [];
  let waiting: { marker: string; resolve: () => void } | null = null;
  port1.on('message', (url: string) => {
    loaded.push(url);
    if (waiting !== null && url === waiting.marker) waiting.resolve();
  });
  port1.unref();
  const hooks = `
    let port;
    export function initialize(data) { port = data.port; }
    export async function load(url, context, next) { port.postMessage(url); return next(url, context); }
  `;
  register(`data:text/javascript,${encodeURIComponent(hooks)}`, { data: { port: port2 }, transferList: [port2] });
  return {
    // The port keeps the order of the hooks' messages: once a module loaded last is reported, every earlier one is.
    settle: async () => {
      const marker = `data:text/javascript,export default ${Date.now()}${Math.random().toString().slice(2)}`;
      const reported = new Promise<void>((resolve) => (waiting = { marker, resolve }));
      await import(marker);
      await reported;
      return [...loaded];
    },
  };
}
