/**
 * An outcome settled once, at once or later: `value()` returns it when it came before (a
 * value, or a throw for an error), else a promise of it. For an answer that is often ready
 * before its caller asks (a hit from process memory), without a promise and its hops then.
 */
export interface SettleOnce<T> {
  resolve(value: T): void;
  reject(error: unknown): void;
  value(): T | Promise<T>;
}

export function settleOnce<T>(): SettleOnce<T> {
  let state: 'pending' | 'resolved' | 'rejected' = 'pending';
  let result: unknown;
  let later: { resolve(value: T): void; reject(error: unknown): void } | undefined;
  const settle = (to: 'resolved' | 'rejected', value: unknown) => {
    if (state !== 'pending') return;
    state = to;
    result = value;
    if (later === undefined) return;
    if (to === 'resolved') later.resolve(value as T);
    else later.reject(value);
  };
  return {
    resolve: (value) => settle('resolved', value),
    reject: (error) => settle('rejected', error),
    value() {
      if (state === 'resolved') return result as T;
      if (state === 'rejected') throw result;
      return new Promise<T>((resolve, reject) => {
        later = { resolve, reject };
      });
    },
  };
}
