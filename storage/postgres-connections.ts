import pg from 'pg';

/** SQLSTATE classes and codes that mean the session is gone (connection exception, admin/crash shutdown, starting up). */
const LOST_STATES = /^(08...|57P0[123])$/;
/** What pg and the socket say when a connection ends under a query (they carry no SQLSTATE). */
const LOST_MESSAGES = /^(Connection terminated( unexpectedly)?|Client has encountered a connection error and is not queryable|Client was closed and is not queryable)$/;
/**
 * Socket errors of opening a connection. Not ECONNRESET or EPIPE: a client abandoning its request
 * raises those too, and the kernel would report a lost database for it.
 */
const LOST_SOCKET_CODES = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH']);

/**
 * True when `err` comes from a Postgres connection that died or could not be opened (a backend
 * ended by `pg_terminate_backend`, a failover, a restart, the server unreachable): the statement did
 * not fail on its own account and may succeed on a new connection.
 */
export function isPostgresConnectionLost(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  if (connectionErrors.has(err)) return true;
  const { code, message } = err as { code?: unknown; message?: unknown };
  if (typeof code === 'string' && (LOST_STATES.test(code) || LOST_SOCKET_CODES.has(code))) return true;
  return typeof message === 'string' && LOST_MESSAGES.test(message);
}

/**
 * Errors a supervised client raised as its connection died (a socket's EPIPE or ECONNRESET among
 * them): pg fails the client's statements with these very objects.
 */
const connectionErrors = new WeakSet<object>();
const remember = (err: unknown) => {
  if (typeof err === 'object' && err !== null) connectionErrors.add(err);
};

/** The session fields pg keeps on a connected client (not in its type declarations). */
interface SessionKeys {
  processID: number | null;
  secretKey: number | null;
  host: string;
  port: number;
}

/** pg's protocol connection, as far as a cancel request uses it (not in its type declarations). */
interface CancelConnection {
  connect(portOrPath: number | string, host?: string): void;
  cancel(processID: number, secretKey: number): void;
  on(event: 'connect' | 'end' | 'error', listener: () => void): void;
  end(): void;
  stream: { destroy(): void };
}

const CANCEL_TIMEOUT_MS = 5_000;

/**
 * Asks the server to cancel what the client's backend runs now: a protocol CancelRequest on a
 * connection of its own (what psql's Ctrl-C sends), which needs no free connection slot and no login.
 */
export function cancelStatement(client: pg.ClientBase): Promise<void> {
  const { processID, secretKey, host, port } = client as unknown as SessionKeys;
  if (processID === null || secretKey === null) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const connection = new pg.Connection() as unknown as CancelConnection;
    const timer = setTimeout(done, CANCEL_TIMEOUT_MS);
    timer.unref();
    function done() {
      clearTimeout(timer);
      // An unanswered cancel (an unreachable server) must not keep its socket, and the process, alive.
      connection.stream.destroy();
      resolve();
    }
    connection.on('connect', () => connection.cancel(processID, secretKey));
    connection.on('end', done);
    connection.on('error', done);
    if (host.startsWith('/')) connection.connect(`${host}/.s.PGSQL.${port}`);
    else connection.connect(port, host);
  });
}

/**
 * Makes a pool safe against connections that die, and able to stop what its clients run:
 * - every client handles `error` for its whole life: a backend terminated while its client is
 *   checked out (`pg_terminate_backend`, a failover) fails the statement, and pg would otherwise
 *   raise the client's `error` as an unhandled event that ends the process. The pool drops such a
 *   client when it comes back (and an idle one at once) and opens a new one on demand;
 * - the checked-out clients are tracked, so `cancelRunning` can stop their statements.
 */
export function superviseConnections(pool: pg.Pool): { cancelRunning(): Promise<void> } {
  const checkedOut = new Set<pg.PoolClient>();
  // The failure reaches the caller through its failing statement: the event only marks its error as a lost connection.
  pool.on('error', remember); // an idle client whose connection ended
  pool.on('connect', (client) => client.on('error', remember));
  pool.on('acquire', (client) => checkedOut.add(client));
  pool.on('release', (_err, client) => checkedOut.delete(client));
  pool.on('remove', (client) => checkedOut.delete(client as pg.PoolClient));
  return {
    cancelRunning: async () => {
      await Promise.all([...checkedOut].map(cancelStatement));
    },
  };
}
