import { DogpileError } from '../shared/errors.js';

/**
 * A stored entry written with a serializer this process cannot read (another `serializer`
 * option, or `v8Serializer` under another engine): not corrupt, and not this process's to
 * replace while it is fresh. The `error` of a `corrupt` event, once per key.
 */
export class UnknownSerializerError extends DogpileError {
  override readonly code = 'E_UNKNOWN_SERIALIZER' as const;
  /** The name of the serializer the entry was written with. */
  readonly written: string;
  /** The name of this process's serializer (undefined: it has none). */
  readonly own: string | undefined;
  /** The entry's header: when it was created and how long it is fresh (ms). */
  entry: { createdAt: number; ttl: number } | undefined;

  constructor(written: string, own: string | undefined, options: { key?: string } = {}) {
    super(`the stored entry was written with the "${written}" serializer, which this process (serializer "${own ?? 'unnamed'}") cannot read; give every process of the fleet the same serializer`, options);
    this.written = written;
    this.own = own;
  }
}
