/**
 * Child Node processes for the tests and the benchmarks: one class, `NodeChild`, that spawns
 * `node <argv...>`, keeps its output (stdout line by line and as text, stderr), waits for a
 * line with a bound, and ends the process (by a signal, by closing its stdin, or killed);
 * `JsonChild` adds the JSON-lines protocol of `test/fixtures/child-io.ts`. Every child still
 * running can be killed at once with `killAllChildren()` (a test file's afterAll/afterEach).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/** The repository root. */
export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface ChildOptions {
  cwd?: string;
  /** The child's environment (default: this process's). */
  env?: NodeJS.ProcessEnv;
  /** 'ignore': the child reads an empty stdin (default: a pipe, for `write()`). */
  stdin?: 'pipe' | 'ignore';
  /** The executable to run instead of this Node (another Node version, Bun, Deno). */
  command?: string;
}

const live = new Set<NodeChild>();

export class NodeChild {
  readonly proc: ChildProcess;
  readonly exited: Promise<Exit>;
  /** Every stdout line so far. */
  readonly lines: string[] = [];
  private out = '';
  private err = '';
  private readonly waiting = new Set<() => void>();

  /** Runs `node <argv...>`. */
  constructor(
    readonly label: string,
    argv: string[],
    options: ChildOptions = {},
  ) {
    this.proc = spawn(options.command ?? process.execPath, argv, { cwd: options.cwd ?? root, env: options.env, stdio: [options.stdin ?? 'pipe', 'pipe', 'pipe'] });
    live.add(this);
    this.exited = new Promise((resolve) =>
      this.proc.once('exit', (code, signal) => {
        live.delete(this);
        resolve({ code, signal });
      }),
    );
    this.proc.stderr!.setEncoding('utf8').on('data', (d: string) => (this.err += d));
    this.proc.stdin?.on('error', () => {
      /* the child may be gone (killed on purpose) */
    });
    this.proc.stdout!.setEncoding('utf8').on('data', (d: string) => (this.out += d));
    createInterface({ input: this.proc.stdout! }).on('line', (line) => {
      this.lines.push(line);
      this.onLine(line);
      this.wake();
    });
    void this.exited.then(() => this.wake());
  }

  /** Runs a TypeScript file of the repository with tsx: `node [nodeArgs] --import tsx <root>/<script> ...args`. */
  static tsx(script: string, args: string[] = [], options: ChildOptions & { nodeArgs?: string[] } = {}): NodeChild {
    return new NodeChild(script, [...(options.nodeArgs ?? []), '--import', 'tsx', path.join(root, script), ...args], options);
  }

  /** Everything written to stdout so far. */
  get stdout(): string {
    return this.out;
  }

  /** Everything written to stderr so far. */
  get stderr(): string {
    return this.err;
  }

  get running(): boolean {
    return this.proc.exitCode === null && this.proc.signalCode === null;
  }

  /** Called for every stdout line (subclasses parse it). */
  protected onLine(_line: string): void {}

  /** Wakes every pending wait to check again. */
  protected wake(): void {
    for (const check of [...this.waiting]) check();
  }

  /**
   * Resolves when `found()` returns something other than undefined (checked now, on every
   * line and at exit); rejects when the child exits first or after `timeoutMs`.
   */
  protected until<T>(what: string, found: () => T | undefined, timeoutMs: number): Promise<T> {
    return new Promise((resolve, reject) => {
      const check = () => {
        let result: T | undefined;
        try {
          result = found();
        } catch (error) {
          return done(() => reject(error as Error));
        }
        if (result !== undefined) return done(() => resolve(result));
        if (!this.running) {
          done(() => reject(new Error(`${this.label} exited (${this.proc.exitCode ?? this.proc.signalCode}) before ${what}; ${this.describe()}`)));
        }
      };
      const timer = setTimeout(() => done(() => reject(new Error(`${this.label}: no ${what} within ${timeoutMs} ms; ${this.describe()}`))), timeoutMs);
      const done = (settle: () => void) => {
        clearTimeout(timer);
        this.waiting.delete(check);
        settle();
      };
      this.waiting.add(check);
      check();
    });
  }

  /** The first stdout line that satisfies `match` (also one already received). */
  waitFor(match: (line: string) => boolean, timeoutMs?: number): Promise<string>;
  /** The first match of `pattern` in the whole stdout (also in what was already printed). */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  waitFor(match: ((line: string) => boolean) | RegExp, timeoutMs = 45_000): Promise<string | RegExpMatchArray> {
    if (match instanceof RegExp) return this.until(`output matching ${match}`, () => this.out.match(match) ?? undefined, timeoutMs);
    return this.until('the expected line', () => this.lines.find(match), timeoutMs);
  }

  /** Writes raw text to the child's stdin. */
  write(text: string): void {
    this.proc.stdin!.write(text);
  }

  kill(signal: NodeJS.Signals = 'SIGKILL'): void {
    if (this.running) this.proc.kill(signal);
  }

  /** Sends `signal` and resolves when the process has exited (SIGKILL after `timeoutMs`). */
  async stop(signal: NodeJS.Signals = 'SIGTERM', timeoutMs = 20_000): Promise<Exit> {
    this.kill(signal);
    return this.exitOrKill(timeoutMs);
  }

  /** Closes the child's stdin (it is expected to exit then) and resolves when it has (SIGKILL after `timeoutMs`). */
  async endInput(timeoutMs = 10_000): Promise<Exit> {
    if (this.running) this.proc.stdin?.end();
    return this.exitOrKill(timeoutMs);
  }

  /** Waits for the process to end by itself; kills it (and fails) if it does not. */
  async waitExit(timeoutMs = 10_000): Promise<Exit> {
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), timeoutMs)));
    const result = await Promise.race([this.exited, timedOut]);
    clearTimeout(timer);
    if (result === 'timeout') {
      await this.dispose();
      throw new Error(`${this.label} did not exit by itself within ${timeoutMs} ms`);
    }
    return result;
  }

  private async exitOrKill(timeoutMs: number): Promise<Exit> {
    const timer = setTimeout(() => this.kill('SIGKILL'), timeoutMs);
    const exit = await this.exited;
    clearTimeout(timer);
    return exit;
  }

  /** Ends the child whatever happened (SIGKILL) and waits for it. */
  async dispose(): Promise<void> {
    this.kill();
    await this.exited;
  }

  private describe(): string {
    return `stdout:\n${this.out.slice(-4000)}\nstderr:\n${this.err.slice(-4000)}`;
  }
}

/**
 * The path of the executable `bin` of the npm package `pkg` (`bun`, `deno`, `node@26`), fetched
 * into npx's cache when missing (about 15 s each on a fresh machine; CI fetches them first).
 */
export function npxBinary(pkg: string, bin = pkg): string {
  return execFileSync('npx', ['-y', '-p', pkg, '-c', `command -v ${bin}`], { cwd: root, encoding: 'utf8', timeout: 300_000 }).trim();
}

/** Kills every child still running (call in afterAll / afterEach). */
export async function killAllChildren(): Promise<void> {
  await Promise.all([...live].map((child) => child.dispose()));
}

export type Message = Record<string, any> & { event: string };

/**
 * A Node process speaking JSON lines: commands go to its stdin, each stdout line is a message
 * `{ event, ... }` (the protocol of `test/fixtures/child-io.ts` and of the fleet harness, `tools/fleet/member.ts`). A
 * `fatal` or `unhandled-rejection` message fails every later `take`.
 */
export class JsonChild extends NodeChild {
  private readonly messages: Message[] = [];
  private failure: Error | undefined;

  protected override onLine(line: string): void {
    let message: Message;
    try {
      message = JSON.parse(line) as Message;
    } catch {
      return;
    }
    if (message.event === 'fatal' || message.event === 'unhandled-rejection') {
      this.failure = new Error(`${this.label}: ${message.event}: ${message.message}`);
    }
    this.messages.push(message);
  }

  /** What a `fatal` or `unhandled-rejection` message said, if one came. */
  get failed(): string | undefined {
    return this.failure?.message;
  }

  send(command: Record<string, unknown>): void {
    this.write(`${JSON.stringify(command)}\n`);
  }

  /** The next message with this event (and, given `match`, that it accepts); each message is taken once. */
  take(event: string, timeoutMs = 10_000, match: (message: Message) => boolean = () => true): Promise<Message> {
    return this.until(
      `"${event}"`,
      () => {
        if (this.failure) throw this.failure;
        const i = this.messages.findIndex((m) => m.event === event && match(m));
        return i === -1 ? undefined : this.messages.splice(i, 1)[0]!;
      },
      timeoutMs,
    );
  }

  /** Messages of this event received so far (not taken). */
  seen(event: string): Message[] {
    return this.messages.filter((m) => m.event === event);
  }

  /** Asks the child to exit (`{ cmd: 'exit' }`); true when it then ended by itself with code 0. */
  async exit(timeoutMs = 10_000): Promise<boolean> {
    if (!this.running) return this.proc.exitCode === 0;
    this.send({ cmd: 'exit' });
    try {
      return (await this.waitExit(timeoutMs)).code === 0;
    } catch {
      return false;
    }
  }
}
