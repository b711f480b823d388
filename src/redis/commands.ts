export type CommandArg = string | number | Buffer;

/**
 * The narrow part of the client that the lock and the store call: exactly these commands.
 * ioredis' `Redis` and `Cluster` both fit it as they are.
 */
export interface CommandClient {
  call(command: string, ...args: CommandArg[]): Promise<unknown>;
  /** Like `call`, but bulk replies come back as Buffers. */
  callBuffer(command: string, ...args: CommandArg[]): Promise<unknown>;
  get(key: string): Promise<string | null>;
  getBuffer(key: string): Promise<Buffer | null>;
  set(key: string, value: Buffer, px: 'PX', ms: number): Promise<unknown>;
  del(key: string): Promise<number>;
}
