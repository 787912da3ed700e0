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
