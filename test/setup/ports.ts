import { createServer } from 'net';

/**
 * A TCP port on 127.0.0.1 that is free now, in 20000-32767: never handed out as an ephemeral
 * port, so no outgoing connection (to PostgreSQL, Redis, another test file's server) can take it
 * between this check and the caller's listen.
 */
export async function freePortBelowEphemeral(): Promise<number> {
  for (;;) {
    const candidate = 20000 + Math.floor(Math.random() * 12768);
    const free = await new Promise<boolean>((resolve) => {
      const srv = createServer()
        .once('error', () => resolve(false))
        .listen(candidate, '127.0.0.1', () => srv.close(() => resolve(true)));
    });
    if (free) return candidate;
  }
}
