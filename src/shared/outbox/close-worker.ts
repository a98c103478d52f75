import type { RedisClient, Worker } from 'bullmq';

/** How long a closing worker waits for Redis to answer on its connections before it stops waiting for its jobs. */
export const WORKER_CLOSE_READY_MS = 5000;

/** Settles with whether the client is usable (ready) within ms: ready, ended and never-connected clients settle at once. */
async function readyWithin(client: Promise<RedisClient> | undefined, ms: number): Promise<boolean> {
  if (!client) return true;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    const c = await Promise.race([client, timeout]);
    if (c === false) return false;
    // 'wait' (never connected) and 'end' (closed) are handled by BullMQ's close without waiting
    if (c.status === 'ready' || c.status === 'wait' || c.status === 'end') return true;
    let onReady: () => void = () => undefined;
    const ready = new Promise<true>((resolve) => {
      onReady = () => resolve(true);
      c.once('ready', onReady);
    });
    try {
      return await Promise.race([ready, timeout]);
    } finally {
      c.removeListener('ready', onReady);
    }
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Closes a BullMQ worker, letting the jobs it runs finish. BullMQ's close() interrupts the
 * blocking connection and waits for its 'end', which a connection between two reconnection
 * attempts (no socket: Redis just back, or away) never emits, so the close would wait forever
 * (taskforcesh/bullmq#4656; seen as a hung shutdown right after a Redis restart). It first waits
 * up to readyMs for both connections to be ready; if Redis does not answer by then, the running
 * jobs could not record their outcome anyway: the worker closes without waiting for them (their
 * locks expire and the stalled check of a worker runs them again, each job being idempotent).
 */
export async function closeWorker(worker: Worker, readyMs = WORKER_CLOSE_READY_MS): Promise<void> {
  const [main, blocking] = await Promise.all([readyWithin(worker.backend.client, readyMs), readyWithin(worker.backend.blockingClient, readyMs)]);
  await worker.close(!(main && blocking));
}
