import {
  backendErrorChannel,
  getOrComputeChannel,
  loaderChannel,
  lockChannel,
  type BackendErrorMessage,
  type GetOrComputeTrace,
  type LoaderTrace,
  type LockTrace,
} from './diagnostics.js';

/** What a metrics integration hears: each call, loader run and lock acquisition once it has finished, and each Redis error. */
interface DiagnosticsObserver {
  call?(ctx: GetOrComputeTrace): void;
  loader?(ctx: LoaderTrace): void;
  lock?(ctx: LockTrace): void;
  backendError?(message: BackendErrorMessage): void;
}

/** The outcome label of a finished call: its outcome, or `error` when it failed. */
export function outcomeLabel(ctx: { outcome?: string; error?: unknown }): string {
  return ctx.outcome ?? 'error';
}

/**
 * Subscribes `observer` to the `dogpile-guard:*` channels (`asyncEnd`: the traced operation
 * has finished, successfully or not). Returns the function that unsubscribes.
 */
export function observeDiagnostics(observer: DiagnosticsObserver): () => void {
  const undo: (() => void)[] = [];
  const { call, loader, lock, backendError } = observer;
  if (call) {
    const onEnd = (ctx: unknown) => call(ctx as GetOrComputeTrace);
    getOrComputeChannel.asyncEnd.subscribe(onEnd);
    undo.push(() => getOrComputeChannel.asyncEnd.unsubscribe(onEnd));
  }
  if (loader) {
    const onEnd = (ctx: unknown) => loader(ctx as LoaderTrace);
    loaderChannel.asyncEnd.subscribe(onEnd);
    undo.push(() => loaderChannel.asyncEnd.unsubscribe(onEnd));
  }
  if (lock) {
    const onEnd = (ctx: unknown) => lock(ctx as LockTrace);
    lockChannel.asyncEnd.subscribe(onEnd);
    undo.push(() => lockChannel.asyncEnd.unsubscribe(onEnd));
  }
  if (backendError) {
    const onMessage = (message: unknown) => backendError(message as BackendErrorMessage);
    backendErrorChannel.subscribe(onMessage);
    undo.push(() => backendErrorChannel.unsubscribe(onMessage));
  }
  let done = false;
  return () => {
    if (done) return;
    done = true;
    for (const u of undo) u();
  };
}
