import pg from 'pg';

/** How long connecting, or a LISTEN or UNLISTEN, may take before it counts as failed. */
const TIMEOUT_MS = 10_000;

/**
 * Every LISTEN of a process on one Postgres connection of its own (pg's pool cannot hold one:
 * a pooled client is handed to other queries between them). Channels are LISTENed while they
 * have a handler and UNLISTENed when their last one goes; the connection is opened with the
 * first channel and closed with the last.
 *
 * A lost connection is opened again (after 200 ms, then every second), every channel LISTENed
 * on it, and then every handler called once, since notifications may have been missed while it
 * was gone. A server that connects but refuses LISTEN (a standby in recovery) gets no
 * connection kept open for it.
 */
export class PgListener {
  /** channel → its handlers, each the wrapper made by one `listen` call. */
  readonly #channels = new Map<string, Set<(payload: string | null) => void>>();
  #client: pg.Client | null = null;
  #retry: NodeJS.Timeout | null = null;
  /** Connecting, LISTEN and UNLISTEN run one at a time, in the order asked. */
  #queue: Promise<unknown> = Promise.resolve();
  #closed = false;

  constructor(
    private readonly url: string,
    private readonly options: { application?: string; timeoutMs?: number } = {},
  ) {}

  /**
   * Calls `onNotify` with its payload for each NOTIFY on `channel` until the returned function
   * is called, and with null after a reconnection (whatever was notified meanwhile is unknown).
   * Rejects, with nothing left registered, when the server cannot be reached or refuses LISTEN.
   */
  listen(channel: string, onNotify: (payload: string | null) => void): Promise<() => Promise<void>> {
    const handler = (payload: string | null) => onNotify(payload);
    return this.#serial(async () => {
      if (this.#closed) throw new Error('the LISTEN connection is closed');
      const client = this.#client ?? (await this.#connect());
      const handlers = this.#channels.get(channel);
      if (handlers === undefined) {
        try {
          await client.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
        } catch (err) {
          // Refused by the server: the connection is sound, but one nobody listens on is not
          // kept. Anything else (no answer in time, the connection gone) leaves it in doubt: it
          // is replaced.
          if (!(err instanceof pg.DatabaseError)) this.#lost(client);
          else if (this.#channels.size === 0) this.#drop(client);
          throw err;
        }
        this.#channels.set(channel, new Set([handler]));
        // The connection went while its LISTEN was answered (both in one read): it was let go
        // with no channel to reconnect for, and this one needs it.
        if (this.#client !== client) this.#scheduleReconnect(200);
      } else {
        handlers.add(handler);
      }
      return () => this.#unlisten(channel, handler);
    });
  }

  /** Stops every channel and closes the connection; later `listen` calls reject. */
  close(): Promise<void> {
    return this.#serial(async () => {
      this.#closed = true;
      this.#channels.clear();
      await this.#closeConnection();
    });
  }

  /** The channels LISTENed now (for tests). */
  get channels(): string[] {
    return [...this.#channels.keys()];
  }

  #unlisten(channel: string, handler: (payload: string | null) => void): Promise<void> {
    return this.#serial(async () => {
      const handlers = this.#channels.get(channel);
      if (handlers === undefined || !handlers.delete(handler) || handlers.size > 0) return;
      this.#channels.delete(channel);
      if (this.#channels.size === 0) return this.#closeConnection();
      // A failure here leaves the connection in doubt: it is replaced, and the new one LISTENs
      // only the channels left.
      const client = this.#client;
      if (client !== null) await client.query(`UNLISTEN ${pg.escapeIdentifier(channel)}`).catch(() => this.#lost(client));
    });
  }

  /** No channel left: no retry, no connection. */
  async #closeConnection(): Promise<void> {
    this.#stopRetrying();
    const c = this.#client;
    this.#client = null;
    if (c !== null) await this.#end(c);
  }

  #serial<T>(work: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(work, work);
    this.#queue = run.catch(() => {});
    return run;
  }

  /** Opens the connection and LISTENs every channel that has handlers; calls them all if any. */
  async #connect(): Promise<pg.Client> {
    // Bounded, so that a server that stops answering (a host gone from the network) cannot hold
    // the queue, and with it every later LISTEN, UNLISTEN and the close, for ever.
    const timeoutMs = this.options.timeoutMs ?? TIMEOUT_MS;
    const c = new pg.Client({
      connectionString: this.url,
      application_name: this.options.application ?? 'mailtally:listen',
      connectionTimeoutMillis: timeoutMs,
      query_timeout: timeoutMs,
    });
    c.on('notification', (n) => {
      for (const h of this.#channels.get(n.channel) ?? []) h(n.payload ?? '');
    });
    let gone = false;
    const lost = () => {
      gone = true;
      this.#lost(c);
    };
    c.on('error', lost);
    c.on('end', lost);
    try {
      await c.connect();
      for (const channel of this.#channels.keys()) await c.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
      // Lost in the same read as the last answer: not yet ours, so nobody replaced it.
      if (gone) throw new Error('the LISTEN connection was lost while it was opened');
    } catch (err) {
      // Connected but refused LISTEN (a standby in recovery, say): close it, or every retry
      // would leave one more connection open.
      void this.#end(c);
      throw err;
    }
    this.#client = c;
    this.#stopRetrying();
    // Whatever was notified while there was no connection is lost: every handler looks again.
    for (const handlers of [...this.#channels.values()]) for (const h of [...handlers]) h(null);
    return c;
  }

  /** Ends a connection, waiting at most the timeout for the server to see it go (a frozen one never does). */
  async #end(c: pg.Client): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, this.options.timeoutMs ?? TIMEOUT_MS);
    });
    const ended = await Promise.race([c.end().then(
      () => true,
      () => true,
    ), late.then(() => false)]);
    clearTimeout(timer);
    // Not acknowledged: the socket would stay open (and keep the process alive) until TCP gave up.
    if (!ended) c.connection.stream.destroy();
  }

  #drop(c: pg.Client): void {
    if (this.#client === c) this.#client = null;
    void this.#end(c);
  }

  #lost(c: pg.Client): void {
    if (this.#client !== c) return;
    this.#client = null;
    void this.#end(c);
    this.#scheduleReconnect(200);
  }

  #scheduleReconnect(ms: number): void {
    if (this.#closed || this.#retry !== null || this.#channels.size === 0) return;
    this.#retry = setTimeout(() => {
      this.#retry = null;
      void this.#serial(async () => {
        if (this.#closed || this.#client !== null || this.#channels.size === 0) return;
        await this.#connect();
      }).catch(() => this.#scheduleReconnect(1000));
    }, ms);
  }

  #stopRetrying(): void {
    if (this.#retry !== null) clearTimeout(this.#retry);
    this.#retry = null;
  }
}
