import type Redis from 'ioredis';

/** The commands of one socket write of an ioredis client: each an array of its arguments. */
export type RedisWrite = string[][];

/** The RESP arrays of bulk strings in `chunk` (what a client sends), in order. */
export function parseCommands(chunk: Buffer): string[][] {
  const out: string[][] = [];
  let i = 0;
  const line = () => {
    const end = chunk.indexOf('\r\n', i);
    const s = chunk.toString('latin1', i, end);
    i = end + 2;
    return s;
  };
  while (i < chunk.length) {
    const head = line();
    if (head[0] !== '*') throw new Error(`not a RESP array: ${head}`);
    const args: string[] = [];
    for (let n = Number(head.slice(1)); n > 0; n--) {
      const len = Number(line().slice(1));
      args.push(chunk.toString('utf8', i, i + len));
      i += len + 2;
    }
    out.push(args);
  }
  return out;
}

/**
 * Runs `fn` and returns what the client wrote to Redis meanwhile, one entry per socket write (a
 * round trip), each with the commands it carried. Read off the client's own socket: unlike
 * MONITOR it sees only this client and how its commands were grouped.
 */
export async function redisWrites(redis: Redis, fn: () => Promise<unknown>): Promise<RedisWrite[]> {
  const stream = (redis as unknown as { stream: { write: (chunk: unknown, ...rest: unknown[]) => boolean } }).stream;
  const write = stream.write;
  const writes: RedisWrite[] = [];
  stream.write = (chunk: unknown, ...rest: unknown[]) => {
    writes.push(parseCommands(Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk))));
    return write.call(stream, chunk, ...rest);
  };
  try {
    await fn();
  } finally {
    stream.write = write;
  }
  return writes;
}
