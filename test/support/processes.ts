/**
 * Child Node processes for cross-process tests: spawned with tsx, read line by line, killed
 * when the test file ends.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

export interface Worker {
  child: ChildProcess;
  lines: string[];
  /** Resolves with the first line that satisfies `match` (also one already received). */
  waitFor(match: (line: string) => boolean, timeoutMs?: number): Promise<string>;
  exited: Promise<number | null>;
  send(text: string): void;
  kill(signal?: NodeJS.Signals): void;
}

const live = new Set<ChildProcess>();

export function spawnWorker(script: string, args: string[], extraNodeArgs: string[] = []): Worker {
  const child = spawn(process.execPath, [...extraNodeArgs, '--import', 'tsx', path.join(root, script), ...args], {
    cwd: root,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  live.add(child);
  const lines: string[] = [];
  const waiters = new Set<() => void>();
  let buffer = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => {
    buffer += d.toString();
    let i;
    while ((i = buffer.indexOf('\n')) >= 0) {
      lines.push(buffer.slice(0, i));
      buffer = buffer.slice(i + 1);
    }
    for (const w of [...waiters]) w();
  });
  child.stderr!.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  const exited = new Promise<number | null>((resolve) => {
    child.once('exit', (code) => {
      live.delete(child);
      for (const w of [...waiters]) w();
      resolve(code);
    });
  });
  return {
    child,
    lines,
    exited,
    send: (text) => child.stdin!.write(text),
    kill: (signal = 'SIGKILL') => child.kill(signal),
    waitFor(match, timeoutMs = 30_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const found = lines.find(match);
          if (found !== undefined) {
            done();
            resolve(found);
          } else if (child.exitCode !== null || child.signalCode !== null) {
            done();
            reject(new Error(`worker ${script} exited (${child.exitCode ?? child.signalCode}) before the expected line; stderr:\n${stderr}`));
          }
        };
        const timer = setTimeout(() => {
          done();
          reject(new Error(`worker ${script} did not print the expected line in ${timeoutMs} ms; got:\n${lines.join('\n')}\nstderr:\n${stderr}`));
        }, timeoutMs);
        const done = () => {
          clearTimeout(timer);
          waiters.delete(check);
        };
        waiters.add(check);
        check();
      });
    },
  };
}

/** Kills every worker still running (call in afterAll / afterEach). */
export async function killAllWorkers(): Promise<void> {
  const pending = [...live].map(
    (c) =>
      new Promise<void>((resolve) => {
        if (c.exitCode !== null || c.signalCode !== null) return resolve();
        c.once('exit', () => resolve());
        c.kill('SIGKILL');
      }),
  );
  await Promise.all(pending);
}
