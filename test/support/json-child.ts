import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';

export type Message = Record<string, any> & { event: string };

/**
 * A Node process speaking JSON lines: commands go to its stdin, each stdout line is a message
 * `{ event, ... }` (the protocol of `test/fixtures/child-io.ts` and `bench/lock-worker.ts`). A
 * `fatal` or `unhandled-rejection` message fails every later `take`.
 */
export class JsonChild {
  readonly proc: ChildProcess;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private readonly messages: Message[] = [];
  private readonly waiting = new Set<() => void>();
  private stderr = '';
  private failure: Error | undefined;

  /** Runs `node <argv...>`. */
  constructor(
    readonly label: string,
    argv: string[],
    options: { cwd?: string } = {},
  ) {
    this.proc = spawn(process.execPath, argv, { cwd: options.cwd, stdio: ['pipe', 'pipe', 'pipe'] });
    this.exited = new Promise((resolve) => this.proc.once('exit', (code, signal) => resolve({ code, signal })));
    this.proc.stderr!.on('data', (d: Buffer) => (this.stderr += d.toString()));
    this.proc.stdin!.on('error', () => {
      /* the child may be gone (killed on purpose) */
    });
    createInterface({ input: this.proc.stdout! }).on('line', (line) => {
      let message: Message;
      try {
        message = JSON.parse(line) as Message;
      } catch {
        this.stderr += `${line}\n`;
        return;
      }
      if (message.event === 'fatal' || message.event === 'unhandled-rejection') {
        this.failure = new Error(`${this.label}: ${message.event}: ${message.message}`);
      }
      this.messages.push(message);
      for (const wake of [...this.waiting]) wake();
    });
    void this.exited.then(() => {
      for (const wake of [...this.waiting]) wake();
    });
  }

  send(command: Record<string, unknown>): void {
    this.proc.stdin!.write(`${JSON.stringify(command)}\n`);
  }

  /** The next message with this event (each message is taken once). */
  take(event: string, timeoutMs = 10_000): Promise<Message> {
    return new Promise((resolve, reject) => {
      const check = () => {
        if (this.failure) return done(() => reject(this.failure));
        const i = this.messages.findIndex((m) => m.event === event);
        if (i !== -1) return done(() => resolve(this.messages.splice(i, 1)[0]!));
        if (this.proc.exitCode !== null || this.proc.signalCode !== null) {
          return done(() => reject(new Error(`${this.label} exited (${this.proc.exitCode ?? this.proc.signalCode}) before "${event}"; stderr:\n${this.stderr}`)));
        }
      };
      const timer = setTimeout(() => done(() => reject(new Error(`${this.label}: no "${event}" within ${timeoutMs} ms; stderr:\n${this.stderr}`))), timeoutMs);
      const done = (settle: () => void) => {
        clearTimeout(timer);
        this.waiting.delete(check);
        settle();
      };
      this.waiting.add(check);
      check();
    });
  }

  /** Messages of this event received so far (not taken). */
  seen(event: string): Message[] {
    return this.messages.filter((m) => m.event === event);
  }

  /** Waits for the process to end by itself; kills it (and fails) if it does not. */
  async waitExit(timeoutMs = 10_000): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), timeoutMs)));
    const result = await Promise.race([this.exited, timedOut]);
    clearTimeout(timer);
    if (result === 'timeout') {
      this.kill();
      await this.exited;
      throw new Error(`${this.label} did not exit by itself within ${timeoutMs} ms`);
    }
    return result;
  }

  kill(signal: NodeJS.Signals = 'SIGKILL'): void {
    if (this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill(signal);
  }

  /** Asks the child to exit (`{ cmd: 'exit' }`); true when it then ended by itself with code 0. */
  async exit(timeoutMs = 10_000): Promise<boolean> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return this.proc.exitCode === 0;
    this.send({ cmd: 'exit' });
    try {
      return (await this.waitExit(timeoutMs)).code === 0;
    } catch {
      return false;
    }
  }

  /** Ends the child at the end of a test whatever happened. */
  async dispose(): Promise<void> {
    this.kill();
    await this.exited;
  }
}

/** Every pair of intervals from different processes that overlap (touching ends do not count). */
