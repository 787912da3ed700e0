import { ADMIN_DATABASE_URL, NATS_URL, reachable } from './services.js';

/**
 * Before any test: make sure real Postgres and NATS are there. Uses DATABASE_URL / NATS_URL or
 * the default local ports; when those are down and Docker is available, starts throwaway
 * containers with testcontainers; otherwise fails at once, naming what is missing.
 */
export default async function setup(): Promise<(() => Promise<void>) | undefined> {
  const pgUp = await reachable(ADMIN_DATABASE_URL, 5432);
  const natsUp = await reachable(NATS_URL, 4222);
  if (pgUp && natsUp) return undefined;

  const stops: (() => Promise<unknown>)[] = [];
  try {
    const { GenericContainer, Wait } = await import('testcontainers');
    if (!pgUp) {
      const c = await new GenericContainer('postgres:15')
        .withEnvironment({ POSTGRES_HOST_AUTH_METHOD: 'trust' })
        .withExposedPorts(5432)
        .withWaitStrategy(Wait.forLogMessage(/ready to accept connections/, 2))
        .start();
      stops.push(() => c.stop());
      process.env['DATABASE_URL'] = `postgres://postgres@${c.getHost()}:${c.getMappedPort(5432)}/postgres`;
    }
    if (!natsUp) {
      const c = await new GenericContainer('nats:2.9').withCommand(['-js']).withExposedPorts(4222).start();
      stops.push(() => c.stop());
      process.env['NATS_URL'] = `nats://${c.getHost()}:${c.getMappedPort(4222)}`;
    }
  } catch (err) {
    await Promise.all(stops.map((s) => s()));
    const missing = [!pgUp && `PostgreSQL at ${ADMIN_DATABASE_URL}`, !natsUp && `NATS at ${NATS_URL}`].filter(Boolean).join(' and ');
    throw new Error(
      `The tests need a real ${missing}, which is not reachable, and no Docker is available to start one ` +
        `(${err instanceof Error ? err.message : String(err)}). Start the services or set DATABASE_URL / NATS_URL.`,
    );
  }
  return async () => {
    await Promise.all(stops.map((s) => s()));
  };
}
