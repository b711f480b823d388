/**
 * Every error the library throws is a `DogpileError` with a stable `code`, a correct `name`,
 * the cache key or lock name it concerns (when there is one) and the ES2022 `cause`.
 */

export interface DogpileErrorOptions {
  key?: string;
  cause?: unknown;
}

export class DogpileError extends Error {
  /** Stable, machine-readable code such as `E_LOCK_TIMEOUT`. */
  readonly code: string = 'E_DOGPILE';
  /** The cache key or lock name the error concerns. */
  readonly key: string | undefined;

  constructor(message: string, options: DogpileErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.key = options.key;
  }
}

/** An option or argument is invalid; nothing was sent or written. */
export class InvalidOptionError extends DogpileError {
  override readonly code = 'E_INVALID_OPTION' as const;
  /** The name of the option or argument, e.g. `ttl` or `lockTtl`. */
  readonly option: string;
  constructor(option: string, message: string, options: DogpileErrorOptions = {}) {
    super(`Invalid ${option}: ${message}`, options);
    this.option = option;
  }
}

/** `acquire({ timeout })` gave up before the lock became free. */
export class LockTimeoutError extends DogpileError {
  override readonly code = 'E_LOCK_TIMEOUT' as const;
}

/** The lock expired or was taken by someone else while it was believed held. */
export class LockLostError extends DogpileError {
  override readonly code = 'E_LOCK_LOST' as const;
}

/** `release()` or `extend()` was called on a lock this object does not hold. */
export class LockNotHeldError extends DogpileError {
  override readonly code = 'E_LOCK_NOT_HELD' as const;
}

/** `acquire()` was called on a lock object that is already held or being acquired. */
export class LockAlreadyHeldError extends DogpileError {
  override readonly code = 'E_LOCK_ALREADY_HELD' as const;
}

/** The wait was aborted by the caller's `AbortSignal`. */
export class AbortedError extends DogpileError {
  override readonly code = 'E_ABORTED' as const;
}

/**
 * The loader failed in another process (or before this caller joined). The original error's
 * name and message are kept in `cause` (an `Error` rebuilt from what the leader published).
 */
export class LoaderError extends DogpileError {
  override readonly code = 'E_LOADER' as const;
}

/**
 * The loader a caller waited for failed in another process (what `onRemoteError` is about):
 * a `LoaderError` (`E_LOADER`) whose `cause` is an `Error` rebuilt from what the leader
 * published, and whose `remoteName` and `remoteMessage` are that error's name and message.
 * Exported from the package beside `LoaderError`; the `errors` map holds one class per code, so
 * it lists `LoaderError`, which `instanceof` matches this with.
 */
export class RemoteLoaderError extends LoaderError {
  /** The name of the error the loader threw in the other process. */
  readonly remoteName: string;
  /** The message of the error the loader threw in the other process. */
  readonly remoteMessage: string;
  constructor(message: string, remote: { name: string; message: string }, options: DogpileErrorOptions = {}) {
    const cause = new Error(remote.message);
    cause.name = remote.name;
    super(message, { ...options, cause: options.cause ?? cause });
    this.remoteName = remote.name;
    this.remoteMessage = remote.message;
  }
}

/** A waiter waited `waitTimeout` for another caller's loader and gave up. */
export class WaitTimeoutError extends DogpileError {
  override readonly code = 'E_WAIT_TIMEOUT' as const;
}

/** The loader ran longer than `hardTimeout` and was given up (its `signal` aborts with this error). */
export class LoaderTimeoutError extends DogpileError {
  override readonly code = 'E_LOADER_TIMEOUT' as const;
}

/** A value could not be serialised for storage (functions, symbols, cycles in JSON ...). */
export class SerializationError extends DogpileError {
  override readonly code = 'E_SERIALIZATION' as const;
}

/**
 * A stored entry written with a serializer this process cannot read (another `serializer`
 * option, or `v8Serializer` under another engine): not corrupt, and not this process's to
 * replace while it is fresh. Not thrown: the `error` of a `corrupt` event, once per key.
 */
export class UnknownSerializerError extends DogpileError {
  override readonly code = 'E_UNKNOWN_SERIALIZER' as const;
  /** The name of the serializer the entry was written with. */
  readonly written: string;
  /** The name of this process's serializer (undefined: it has none). */
  readonly own: string | undefined;
  /** The entry's header: when it was created and how long it is fresh (ms). */
  entry: { createdAt: number; ttl: number } | undefined;

  constructor(written: string, own: string | undefined, options: DogpileErrorOptions = {}) {
    super(
      `the stored entry was written with the "${written}" serializer, which this process (serializer "${own ?? 'unnamed'}") cannot read; give every process of the fleet the same serializer`,
      options,
    );
    this.written = written;
    this.own = own;
  }
}

/** The cache was closed; no further calls are accepted. */
export class CacheClosedError extends DogpileError {
  override readonly code = 'E_CACHE_CLOSED' as const;
}

/** The backend (Redis) failed or timed out: what a call rejects with, and the `error` of a `backendError` event. */
export class BackendError extends DogpileError {
  override readonly code = 'E_BACKEND' as const;
}

/**
 * With `replicas` set, the server's replicas did not confirm (`WAIT`) the lock's token within
 * `replicaTimeout`: the acquisition was released, since a failover could have lost it.
 */
export class LockReplicationError extends DogpileError {
  override readonly code = 'E_LOCK_REPLICATION' as const;
}

/**
 * The store's lead was taken but the replicas `replicas` asks for did not confirm it within
 * `replicaTimeout`; the lead was released (the call goes on as after a Redis failure).
 */
export class ReplicationError extends DogpileError {
  override readonly code = 'E_REPLICATION' as const;
}

/** A channel was asked of a subscriber connection after the cache or lock that shared it closed it. */
export class SubscriberClosedError extends DogpileError {
  override readonly code = 'E_SUBSCRIBER_CLOSED' as const;
}

/** All error classes by name, for `instanceof` checks without deep imports. */
export const errors = {
  DogpileError,
  InvalidOptionError,
  LockTimeoutError,
  LockLostError,
  LockNotHeldError,
  LockAlreadyHeldError,
  LockReplicationError,
  ReplicationError,
  SubscriberClosedError,
  AbortedError,
  LoaderError,
  LoaderTimeoutError,
  WaitTimeoutError,
  SerializationError,
  UnknownSerializerError,
  CacheClosedError,
  BackendError,
} as const;
