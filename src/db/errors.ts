/**
 * Is a database error worth retrying? Connection loss, server shutdown, lack of resources,
 * serialization failures and deadlocks are; data and constraint errors are not (retrying the
 * same input fails the same way). Errors with no SQLSTATE come from the network or the driver.
 */
const TRANSIENT_SQLSTATE = /^(08|53|57P|58|40001|40P01|55P03|XX000)/;

export function isTransientDbError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return TRANSIENT_SQLSTATE.test(code);
  return true;
}

/**
 * The pg driver's own errors for a connection lost or never made (a server restart, a crash):
 * they carry no code, unlike the server's SQLSTATEs and the socket's ECONNREFUSED / ECONNRESET.
 */
const CONNECTION_LOSS = /^(Connection terminated|Client has encountered a connection error|Client was closed|timeout exceeded when trying to connect)/;

export function isConnectionLoss(err: unknown): boolean {
  return err instanceof Error && (err as { code?: unknown }).code === undefined && CONNECTION_LOSS.test(err.message);
}

export function describeError(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    return typeof code === 'string' ? `${err.message} (${code})` : err.message;
  }
  return String(err);
}
