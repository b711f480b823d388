/** What demo/demo.ts and its worker processes (demo/worker.ts) say to each other over IPC. */

/** Worker → demo. */
export type WorkerMessage =
  | { type: 'ready'; port: number; pid: number }
  | { type: 'failed'; message: string }
  | { type: 'queries'; queries: Record<string, number> };

/** Demo → worker. */
export type DemoMessage = { type: 'queries' } | { type: 'close' };

/** Settings handed to each worker in its environment. */
export interface WorkerSettings {
  redisUrl: string;
  prefix: string;
  dbMs: number;
  dbPool: number;
}

export const SETTINGS_ENV = 'DOGPILE_DEMO_WORKER';
