import { createHash } from 'node:crypto';
import type { CommandClient } from './client.js';

type Arg = string | number | Buffer;

/**
 * A Lua script with its SHA1. `run` sends EVALSHA and falls back to EVAL when the server
 * does not know the script yet (NOSCRIPT, e.g. after a restart or on a new cluster node).
 * No command is added to the user's client.
 */
export class LuaScript {
  readonly sha: string;
  constructor(
    readonly name: string,
    readonly source: string,
  ) {
    this.sha = createHash('sha1').update(source).digest('hex');
  }

  async run(client: CommandClient, keys: readonly string[], args: readonly Arg[]): Promise<unknown> {
    try {
      return await client.call('EVALSHA', this.sha, keys.length, ...keys, ...args);
    } catch (err) {
      if (!isNoScript(err)) throw err;
      return client.call('EVAL', this.source, keys.length, ...keys, ...args);
    }
  }

  /** Like `run`, but bulk replies come back as Buffers (for binary values). */
  async runBuffer(client: CommandClient, keys: readonly string[], args: readonly Arg[]): Promise<unknown> {
    try {
      return await client.callBuffer('EVALSHA', this.sha, keys.length, ...keys, ...args);
    } catch (err) {
      if (!isNoScript(err)) throw err;
      return client.callBuffer('EVAL', this.source, keys.length, ...keys, ...args);
    }
  }
}

function isNoScript(err: unknown): boolean {
  return err instanceof Error && err.message.startsWith('NOSCRIPT');
}
