/**
 * Is a database error worth retrying? Connection loss, server shutdown, lack of resources,
 * a statement cancelled or timed out, serialization failures and deadlocks are; data and
 * constraint errors are not (retrying the same input fails the same way). Errors with no
 * SQLSTATE come from the network or the driver (a socket's EPIPE is not a SQLSTATE: Postgres
 * has no class starting with E).
 */
const TRANSIENT_SQLSTATE = /^(08|53|57P|57014|58|40001|40P01|55P03|XX000)/;

function sqlState(err: unknown): string | null {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[0-9A-DF-Z][0-9A-Z]{4}$/.test(code) ? code : null;
}

export function isTransientDbError(err: unknown): boolean {
  const code = sqlState(err);
  return code === null || TRANSIENT_SQLSTATE.test(code);
}

/** Node's codes for a connection to the database that failed or broke (refused, reset, unreachable…). */
const SOCKET_ERRORS = new Set(['ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

/**
 * Does the error say the database is away for now: a transient SQLSTATE (shutting down, too
 * many connections…), a socket to it that failed or broke, or a connection lost without a
 * code? Not an error of another kind that has a code of its own (the HTTP server's FST_…, say).
 */
export function isDatabaseAway(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return isConnectionLoss(err);
  return sqlState(err) !== null ? TRANSIENT_SQLSTATE.test(code) : SOCKET_ERRORS.has(code);
}

/** A lock not had within the `lock_timeout` (or NOWAIT): lock_not_available. */
export function isLockNotAvailable(err: unknown): boolean {
  return sqlState(err) === '55P03';
}

/** A table (or other relation) that does not exist: undefined_table. */
export function isUndefinedTable(err: unknown): boolean {
  return sqlState(err) === '42P01';
}

/** A statement the server cancelled at its `statement_timeout` (not one cancelled by a user or at shutdown). */
export function isStatementTimeout(err: unknown): boolean {
  return sqlState(err) === '57014' && err instanceof Error && /statement timeout/.test(err.message);
}

/**
 * Did the database refuse the data itself: a data exception (class 22), a constraint (23), a
 * value over a limit (54)? Only then is an event's row its own fault, to be dead-lettered;
 * anything else (a timeout, a cancel, a missing table) says nothing of the event, which is
 * retried instead.
 */
export function isDataError(err: unknown): boolean {
  return /^(22|23|54)/.test(sqlState(err) ?? '');
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
