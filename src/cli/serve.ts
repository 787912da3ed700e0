import type { Config } from '../config.js';
import { createLogger, type Logger } from '../logger.js';
import { ALL_ROLES, parseRoles, startService } from '../main.js';
import { runsWithServiceFlags, SERVICE_NODE_FLAGS } from '../node-flags.js';

/** A signal this soon after the first is the same stop delivered twice. */
const REPEATED_SIGNAL_MS = 1000;

/**
 * `mailtally serve`: runs until SIGTERM/SIGINT, then drains in-flight work and exits. The
 * signals are heard from the first moment: one during the start (a wait for the schema lock, the
 * migrations) stops what has started and exits — as PID 1 in a container, a signal nobody
 * handles is ignored, and `docker stop` would wait for its SIGKILL. A second signal, a second or
 * more after the first, exits at once without finishing the drain; one sooner is the first
 * delivered twice (npm passes a terminal's Ctrl-C on to a process that has it already, a
 * supervisor signals the whole process group) and changes nothing.
 */
export async function runServe(config: Config, rolesFlag: string | undefined): Promise<number> {
  const roles = rolesFlag !== undefined ? parseRoles(rolesFlag) : [...ALL_ROLES];
  const log = createLogger(config.logLevel);
  const stopping = new AbortController();
  let started = false;
  const stopAsked = new Promise<void>((resolve) => {
    let askedAt: number | null = null;
    const onSignal = (signal: NodeJS.Signals) => {
      if (askedAt === null) {
        askedAt = Date.now();
        log.info({ signal }, started ? 'shutting down: draining in-flight work' : 'shutting down during start: stopping what has started');
        stopping.abort(new Error(`${signal} during start`));
        resolve();
      } else if (Date.now() - askedAt >= REPEATED_SIGNAL_MS) {
        // Nothing is lost: appends to the log are durable, read-model batches atomic, and the
        // NATS messages not yet acked are redelivered.
        log.warn({ signal }, 'second signal: exiting now, without finishing the drain');
        flushAndExit(log, signal === 'SIGINT' ? 130 : 143);
      }
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  });
  if (!runsWithServiceFlags()) log.info({ expected: SERVICE_NODE_FLAGS }, 'started without the Node options mailtally runs with (npm start, the mailtally command and the Docker image give them): read models may take longer to show events under load');
  let service;
  try {
    service = await startService(config, roles, log, stopping.signal);
  } catch (err) {
    if (!stopping.signal.aborted) throw err;
    log.info('stopped before it had started');
    return 0;
  }
  started = true;
  await stopAsked;
  // A database that stopped answering would hold the drain (and the process) forever; the
  // NATS messages left unacked are redelivered, so exiting loses nothing.
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), config.shutdownTimeoutMs);
  });
  const outcome = await Promise.race([service.stop().then(() => 'stopped' as const), timedOut]);
  clearTimeout(timer);
  if (outcome === 'timeout') {
    log.error({ shutdownTimeoutMs: config.shutdownTimeoutMs }, 'shutdown did not finish in time (database not answering?); exiting without it');
    flushAndExit(log, 1);
  }
  log.info('stopped');
  // Whatever might still hold the process (a connection left retrying somewhere) must not keep a
  // stopped service alive for its supervisor to wait on.
  setTimeout(() => {
    log.warn('stopped, but something still held the process 5 s later: exiting');
    flushAndExit(log, 0);
  }, 5000).unref();
  return 0;
}

/** Exits with `code` whatever is still running, its last log lines written first. */
function flushAndExit(log: Logger, code: number): never {
  log.flush();
  process.exit(code);
}
