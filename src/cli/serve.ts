import type { Config } from '../config.js';
import { createLogger } from '../logger.js';
import { AVAILABLE_ROLES, parseRoles, startService } from '../main.js';

/** `mailtally serve`: runs until SIGTERM/SIGINT, then drains in-flight work and exits. */
export async function runServe(config: Config, rolesFlag: string | undefined): Promise<number> {
  const roles = rolesFlag !== undefined ? parseRoles(rolesFlag) : [...AVAILABLE_ROLES];
  const log = createLogger(config.logLevel);
  const service = await startService(config, roles, log);
  await new Promise<void>((resolve) => {
    const onSignal = (signal: NodeJS.Signals) => {
      log.info({ signal }, 'shutting down: draining in-flight work');
      process.off('SIGTERM', onSignal);
      process.off('SIGINT', onSignal);
      resolve();
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  });
  await service.stop();
  log.info('stopped');
  return 0;
}
