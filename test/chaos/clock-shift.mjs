// Imported with `node --import` into a worker whose wall clock is to disagree with the others':
// shifts Date.now() and `new Date()` by CHAOS_CLOCK_SHIFT_MS. performance.now() (the monotonic
// clock) is left alone, as a stepped system clock would leave it.
const shift = Number(process.env.CHAOS_CLOCK_SHIFT_MS ?? 0);
if (shift !== 0) {
  const RealDate = Date;
  const realNow = RealDate.now;
  const shiftedNow = () => realNow() + shift;
  class ShiftedDate extends RealDate {
    constructor(...args) {
      if (args.length === 0) super(shiftedNow());
      else super(...args);
    }
    static now() {
      return shiftedNow();
    }
  }
  globalThis.Date = ShiftedDate;
}
