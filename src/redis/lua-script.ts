import { createHash } from 'node:crypto';
import type { CommandArg, CommandClient } from './client.js';

/**
 * A Lua script with its SHA1, typed by the arguments it takes and the reply it gives. `run`
 * sends EVALSHA and falls back to EVAL when the server does not know the script yet
 * (NOSCRIPT, e.g. after a restart or on a new cluster node). No command is added to the
 * user's client. `Reply` is what the script's source returns (Redis converts Lua tables to
 * arrays, numbers to integers); the script's comment says it, the type holds it.
 */
export class LuaScript<Args extends readonly CommandArg[] = readonly CommandArg[], Reply = unknown> {
  readonly sha: string;
  constructor(
    readonly name: string,
    readonly source: string,
  ) {
    this.sha = createHash('sha1').update(source).digest('hex');
  }

  async run(client: CommandClient, keys: readonly string[], args: Args): Promise<Reply> {
    try {
      return (await client.call('EVALSHA', this.sha, keys.length, ...keys, ...args)) as Reply;
    } catch (err) {
      if (!isNoScript(err)) throw err;
      return (await client.call('EVAL', this.source, keys.length, ...keys, ...args)) as Reply;
    }
  }

  /** Like `run`, but bulk replies come back as Buffers (for binary values). */
  async runBuffer(client: CommandClient, keys: readonly string[], args: Args): Promise<Reply> {
    try {
      return (await client.callBuffer('EVALSHA', this.sha, keys.length, ...keys, ...args)) as Reply;
    } catch (err) {
      if (!isNoScript(err)) throw err;
      return (await client.callBuffer('EVAL', this.source, keys.length, ...keys, ...args)) as Reply;
    }
  }
}

function isNoScript(err: unknown): boolean {
  return err instanceof Error && err.message.startsWith('NOSCRIPT');
}
