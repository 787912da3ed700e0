import { pino } from 'pino';

export type Logger = pino.Logger;

/** One pino logger for the process (fastify logs through it too); credentials never logged. */
export function createLogger(level: string, name = 'mailtally'): Logger {
  return pino({
    name,
    level,
    redact: { paths: ['req.headers.authorization', 'headers.authorization', '*.password', '*.SecretKey'], censor: '[redacted]' },
  });
}
