import { describe, expect, it } from 'vitest';
import { isConnectionLoss, isDataError, isLockNotAvailable, isTransientDbError, isUndefinedTable } from '../../src/db/errors.js';

const withCode = (message: string, code: string) => Object.assign(new Error(message), { code });

describe('database errors', () => {
  it('tells a lock not had in time (55P03) from other errors', () => {
    expect(isLockNotAvailable(withCode('canceling statement due to lock timeout', '55P03'))).toBe(true);
    expect(isLockNotAvailable(withCode('deadlock detected', '40P01'))).toBe(false);
    expect(isLockNotAvailable(new Error('Connection terminated unexpectedly'))).toBe(false);
    expect(isUndefinedTable(withCode('relation "public.statcounters__shadow" does not exist', '42P01'))).toBe(true);
    expect(isUndefinedTable(withCode('column "x" does not exist', '42703'))).toBe(false);
  });

  it("takes the pg driver's code-less messages for a lost connection as connection loss", () => {
    for (const message of [
      'Connection terminated unexpectedly',
      'Connection terminated due to connection timeout',
      'Client has encountered a connection error and is not queryable',
      'Client was closed and is not queryable',
      'timeout exceeded when trying to connect',
    ]) {
      expect(isConnectionLoss(new Error(message)), message).toBe(true);
    }
  });

  it('does not take server errors, coded errors or other messages for connection loss', () => {
    expect(isConnectionLoss(withCode('terminating connection due to administrator command', '57P01'))).toBe(false);
    expect(isConnectionLoss(withCode('Connection terminated unexpectedly', 'ECONNRESET'))).toBe(false);
    expect(isConnectionLoss(new Error('duplicate key value violates unique constraint'))).toBe(false);
    expect(isConnectionLoss('Connection terminated unexpectedly')).toBe(false);
  });

  it('retries connection, resource and serialization failures, not data errors', () => {
    expect(isTransientDbError(withCode('admin shutdown', '57P01'))).toBe(true);
    expect(isTransientDbError(withCode('could not serialize access', '40001'))).toBe(true);
    expect(isTransientDbError(withCode('connection refused', 'ECONNREFUSED'))).toBe(true);
    expect(isTransientDbError(new Error('Connection terminated unexpectedly'))).toBe(true);
    expect(isTransientDbError(withCode('invalid input syntax for type bigint', '22P02'))).toBe(false);
    expect(isTransientDbError(withCode('duplicate key value', '23505'))).toBe(false);
  });

  it('retries a statement cancelled or timed out, and a socket error whose code looks like a SQLSTATE', () => {
    expect(isTransientDbError(withCode('canceling statement due to statement timeout', '57014'))).toBe(true);
    expect(isTransientDbError(withCode('write EPIPE', 'EPIPE'))).toBe(true);
  });

  it('takes only data, constraint and limit errors for the data’s fault (an event to dead-letter)', () => {
    expect(isDataError(withCode('invalid input syntax for type bigint', '22P02'))).toBe(true);
    expect(isDataError(withCode('duplicate key value', '23505'))).toBe(true);
    expect(isDataError(withCode('index row size exceeds maximum', '54000'))).toBe(true);
    for (const [message, code] of [
      ['canceling statement due to statement timeout', '57014'],
      ['relation "events" does not exist', '42P01'],
      ['permission denied for table events', '42501'],
      ['admin shutdown', '57P01'],
      ['write EPIPE', 'EPIPE'],
    ]) {
      expect(isDataError(withCode(message as string, code as string)), code).toBe(false);
    }
    expect(isDataError(new Error('Connection terminated unexpectedly'))).toBe(false);
  });
});
