/**
 * HTTP-date (RFC 9110 §5.6.7): a recipient accepts the three formats, IMF-fixdate, the obsolete
 * RFC 850 form and asctime, all in GMT. Anything else is invalid (undefined); `Date.parse` is not
 * used because it reads asctime as local time and accepts many non-HTTP forms.
 */
const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
const DAY = '(?:mon|tue|wed|thu|fri|sat|sun)';
const LONG_DAY = '(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)';
const TIME = '(\\d{2}):(\\d{2}):(\\d{2})';
const MONTH = '(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)';
const IMF_FIXDATE = new RegExp(`^${DAY}, (\\d{2}) ${MONTH} (\\d{4}) ${TIME} GMT$`, 'i');
const RFC850 = new RegExp(`^${LONG_DAY}, (\\d{2})-${MONTH}-(\\d{2}) ${TIME} GMT$`, 'i');
const ASCTIME = new RegExp(`^${DAY} ${MONTH} ( \\d|\\d{2}) ${TIME} (\\d{4})$`, 'i');

/** Milliseconds since the epoch of an HTTP-date, or undefined when the value is not one. */
export function parseHttpDate(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const s = value.trim();
  let parts: { day: string; month: string; year: number; time: [string, string, string] };
  let match = IMF_FIXDATE.exec(s);
  if (match) {
    parts = { day: match[1]!, month: match[2]!, year: Number(match[3]), time: [match[4]!, match[5]!, match[6]!] };
  } else if ((match = RFC850.exec(s))) {
    // RFC 9110 §5.6.7: a two-digit year more than 50 years in the future is in the past century.
    const yy = Number(match[3]);
    const century = 2000 + yy > new Date().getUTCFullYear() + 50 ? 1900 : 2000;
    parts = { day: match[1]!, month: match[2]!, year: century + yy, time: [match[4]!, match[5]!, match[6]!] };
  } else if ((match = ASCTIME.exec(s))) {
    parts = { day: match[2]!.trim(), month: match[1]!, year: Number(match[6]), time: [match[3]!, match[4]!, match[5]!] };
  } else {
    return undefined;
  }
  const { day, month, year } = parts;
  const [h, m, sec] = parts.time;
  const mon = MONTHS.indexOf(month.toLowerCase());
  const d = Number(day);
  const hh = Number(h);
  const mm = Number(m);
  const ss = Number(sec);
  if (d < 1 || d > 31 || hh > 23 || mm > 59 || ss > 60) return undefined;
  const t = Date.UTC(year, mon, d, hh, mm, Math.min(ss, 59));
  // Reject dates that roll over (31 Feb).
  if (new Date(t).getUTCDate() !== d) return undefined;
  return t;
}

/** An IMF-fixdate for a time in milliseconds (what `Date` headers carry). */
export function formatHttpDate(ms: number): string {
  return new Date(ms).toUTCString();
}
