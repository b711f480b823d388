/**
 * An outcome settled once, at once or later: `value()` returns it when it came before (a
 * value, or a throw for an error), else a promise of it. For an answer that is often ready
 * before its caller asks (a hit from process memory), without a promise and its hops then.
 * A class, so that an adapter's exchange can be one (`extends SettleOnce`): one object per
 * request, its methods on the prototype (call them on the object, not detached).
 */
export class SettleOnce<T> {
  private state: 'pending' | 'resolved' | 'rejected' = 'pending';
  private result: unknown = undefined;
  private later: { resolve(value: T): void; reject(error: unknown): void } | undefined = undefined;

  resolve(value: T): void {
    this.settle('resolved', value);
  }

  reject(error: unknown): void {
    this.settle('rejected', error);
  }

  value(): T | Promise<T> {
    if (this.state === 'resolved') return this.result as T;
    if (this.state === 'rejected') throw this.result;
    return new Promise<T>((resolve, reject) => {
      this.later = { resolve, reject };
    });
  }

  private settle(to: 'resolved' | 'rejected', value: unknown): void {
    if (this.state !== 'pending') return;
    this.state = to;
    this.result = value;
    const later = this.later;
    if (later === undefined) return;
    if (to === 'resolved') later.resolve(value as T);
    else later.reject(value);
  }
}
