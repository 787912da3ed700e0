import { pino } from 'pino';

export type Logger = pino.Logger;

/**
 * One pino logger for the process (fastify logs through it too); credentials never logged.
 * `destination` is stdout unless given (tests capture the lines).
 */
export function createLogger(level: string, name = 'mailtally', destination?: pino.DestinationStream): Logger {
  const options: pino.LoggerOptions = {
    name,
    level,
    redact: { paths: ['req.headers.authorization', 'headers.authorization', '*.password', '*.SecretKey'], censor: '[redacted]' },
  };
  return destination !== undefined ? pino(options, destination) : pino(options);
}

/**
 * For a condition that may repeat many times a second (every request or batch while the
 * database is down): `take()` is true at most once per `everyMs`, and `suppressed` says how
 * many times it was false since the last true, for that line to report.
 */
export class LogThrottle {
  #last = -Infinity;
  #skipped = 0;
  suppressed = 0;

  constructor(private readonly everyMs: number) {}

  take(now = Date.now()): boolean {
    if (now - this.#last < this.everyMs) {
      this.#skipped++;
      return false;
    }
    this.#last = now;
    this.suppressed = this.#skipped;
    this.#skipped = 0;
    return true;
  }
}
