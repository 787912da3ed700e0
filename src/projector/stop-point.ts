/**
 * Where a long rebuild may stop: after a turn of the event loop, throws if `signal` is aborted.
 * The turn matters on the embedded database, which runs each statement on this thread and
 * settles its promises without one: without it a Ctrl-C (a signal handler, like any timer) would
 * be heard only once the whole rebuild is over.
 */
export async function stopPoint(signal: AbortSignal | undefined): Promise<void> {
  await new Promise((resolve) => setImmediate(resolve));
  signal?.throwIfAborted();
}
