/**
 * Raw HTTP/1.1 on a socket: the request goes out exactly as built, the reply is read until the
 * server closes the connection, and the whole exchange has a bound (a connection still open
 * after it is reported, not waited for).
 */
import net from 'node:net';

export interface WireReply {
  status: number;
  /** Header fields in the order received, names lower-cased; repeated fields stay separate. */
  fields: [name: string, value: string][];
  body: Buffer;
}

/**
 * A failed exchange: `timedOut` when the connection was still open at the bound (a hang), else
 * it ended without a whole reply; `fields` holds the reply's head when one arrived.
 */
export type WireResult = { ok: true; reply: WireReply } | { ok: false; error: string; timedOut: boolean; fields?: WireReply['fields'] };

/** Sends `bytes` to 127.0.0.1:`port` and reads the reply until the server closes; fails after `boundMs` of silence or at a socket error. */
export function exchange(port: number, bytes: string, boundMs: number): Promise<WireResult> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    let settled = false;
    const settle = (result: WireResult) => {
      if (settled) return;
      settled = true;
      socket.destroy();
      resolve(result);
    };
    const head = () => {
      try {
        return { fields: parseHead(Buffer.concat(chunks)).fields };
      } catch {
        return {};
      }
    };
    socket.setTimeout(boundMs, () => settle({ ok: false, timedOut: true, error: `no end of the reply within ${boundMs} ms of silence (received ${Buffer.concat(chunks).length} bytes)` }));
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', (err) => settle({ ok: false, timedOut: false, error: `socket error: ${err.message}`, ...head() }));
    socket.on('end', () => {
      try {
        settle({ ok: true, reply: parse(Buffer.concat(chunks)) });
      } catch (error) {
        settle({ ok: false, timedOut: false, error: (error as Error).message, ...head() });
      }
    });
    socket.write(bytes, 'latin1');
  });
}

function parseHead(bytes: Buffer): { statusLine: string | undefined; fields: [string, string][]; end: number } {
  const end = bytes.indexOf('\r\n\r\n');
  if (end === -1) throw new Error(`no complete reply head: ${JSON.stringify(bytes.toString('latin1').slice(0, 300))}`);
  const [statusLine, ...lines] = bytes.subarray(0, end).toString('latin1').split('\r\n');
  const fields: [string, string][] = [];
  for (const line of lines) {
    const colon = line.indexOf(':');
    fields.push([line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim()]);
  }
  return { statusLine, fields, end };
}

function parse(bytes: Buffer): WireReply {
  const { statusLine, fields, end } = parseHead(bytes);
  let body = bytes.subarray(end + 4);
  if (fields.some(([n, v]) => n === 'transfer-encoding' && /chunked/i.test(v)) && body.length > 0) {
    const parts: Buffer[] = [];
    let at = 0;
    for (;;) {
      const lineEnd = body.indexOf('\r\n', at);
      if (lineEnd === -1) throw new Error('a chunked body cut short');
      const size = parseInt(body.subarray(at, lineEnd).toString('latin1'), 16);
      if (!(size > 0)) break;
      parts.push(body.subarray(lineEnd + 2, lineEnd + 2 + size));
      at = lineEnd + 2 + size + 2;
    }
    body = Buffer.concat(parts);
  }
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? '')?.[1] ?? 0);
  return { status, fields, body };
}

/** The values of one field (lower-case name), joined with ", "; undefined when absent. */
export function field(reply: WireReply, name: string): string | undefined {
  const values = reply.fields.filter(([n]) => n === name).map(([, v]) => v);
  return values.length === 0 ? undefined : values.join(', ');
}
