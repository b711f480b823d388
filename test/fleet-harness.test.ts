/**
 * The fleet harness (tools/fleet) that the cross-process tests and the benchmarks share: real
 * child processes start their calls together, report every call, and are all gone after
 * `close()`, also when one of them does not close by itself.
 */
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { killAllChildren } from '../tools/child-process.js';
import { Fleet, launch } from '../tools/fleet/fleet.js';
import type { CallPlan } from '../tools/fleet/plan.js';

const PROBE = 'test/fixtures/fleet-probe.ts';
const fleets: Fleet[] = [];

async function probes(count: number, config: Record<string, unknown> = {}): Promise<Fleet> {
  const fleet = await Fleet.start(PROBE, count, config);
  fleets.push(fleet);
  return fleet;
}

afterEach(async () => {
  await Promise.all(fleets.splice(0).map((f) => f.close()));
});
afterAll(killAllChildren);

describe('the fleet harness', () => {
  it('every process waits for the one planned start, then makes its burst of calls at once; each call is recorded', async () => {
    const fleet = await probes(3, { delayMs: 20 });
    const reports = await Promise.all(fleet.launch<{ pid: number; index: number }>({ mode: 'burst', calls: 5 }, { leadMs: 300 }));
    expect(new Set(reports.map((r) => r.at)).size).toBe(1);
    const at = reports[0]!.at;
    for (const [i, report] of reports.entries()) {
      expect(report.loaderRuns).toBe(5);
      expect(report.records.map((r) => r.index).sort()).toEqual([0, 1, 2, 3, 4]);
      expect(new Set(report.records.map((r) => r.pid))).toEqual(new Set([fleet.member(i).proc.pid]));
      for (const r of report.records) {
        expect(r).toMatchObject({ ok: true, lane: 0 });
        expect(r.at).toBeGreaterThanOrEqual(at);
        expect(r.latency).toBeGreaterThanOrEqual(0);
      }
      // a burst: every call started before the first one ended
      const firstEnd = Math.min(...report.records.map((r) => r.at + r.latency));
      expect(report.records.every((r) => r.at <= firstEnd)).toBe(true);
    }
    expect(await fleet.close()).toBe(true);
    expect(fleet.members.every((m) => !m.running)).toBe(true);
  });

  it('lanes call one after another; an open loop starts its calls on schedule; a failed call records its error and cause', async () => {
    const fleet = await probes(2, { delayMs: 5, failEvery: 3 });
    const lanes = (await fleet.run({ mode: 'lanes', lanes: 2, calls: 4, pauseMs: 1 })).flat();
    expect(lanes).toHaveLength(16);
    for (let p = 0; p < 2; p++) {
      for (const lane of [0, 1]) {
        const mine = lanes.slice(p * 8).slice(0, 8).filter((r) => r.lane === lane);
        expect(mine).toHaveLength(4);
        for (let i = 1; i < mine.length; i++) expect(mine[i]!.at).toBeGreaterThanOrEqual(mine[i - 1]!.at + mine[i - 1]!.latency);
        expect(mine[2]).toMatchObject({ ok: false, name: 'RangeError', message: 'call 2 fails', causeName: 'TypeError', causeMessage: 'the cause' });
      }
    }
    const [open] = await Promise.all(launch(fleet.members.slice(0, 1), { mode: 'open', intervalMs: 10, durationMs: 100, offsetMs: 3 }));
    expect(open!.records).toHaveLength(10);
    for (const [i, r] of open!.records.entries()) {
      expect(r.index).toBe(i);
      expect(r.due).toBe(open!.at + 3 + i * 10);
      expect(r.at).toBeGreaterThanOrEqual(r.due!);
    }
    expect(open!.loaderRuns).toBe(7); // calls 2, 5 and 8 failed before their loader
  });

  it("a scenario's own commands are answered; a process killed mid-run fails its report only", async () => {
    const fleet = await probes(2, { delayMs: 60_000 });
    expect((await fleet.ask({ cmd: 'echo', text: 'hi' }, 'echoed')).map((m) => m.text)).toEqual(['hi', 'hi']);
    const reports = fleet.launch({ mode: 'burst', calls: 1 }, { timeoutMs: 120_000 });
    fleet.member(0).kill('SIGKILL');
    await expect(reports[0]).rejects.toThrow(/exited/);
    fleet.member(1).kill('SIGKILL');
    await expect(reports[1]).rejects.toThrow(/exited/);
  });

  it('open-ended lanes run until stop(); with records: false the report counts the calls instead of listing them', async () => {
    const fleet = await probes(2, { delayMs: 1, failEvery: 4, tell: true });
    const reports = fleet.launch({ mode: 'lanes', lanes: 3, records: false });
    // Both processes are calling before the stop.
    await Promise.all(fleet.members.map((m) => m.take('called', 10_000)));
    fleet.stop();
    for (const report of await Promise.all(reports)) {
      expect(report.records).toEqual([]);
      expect(report.calls as number).toBeGreaterThanOrEqual(1);
      expect(report.calls).toBe((report.loaderRuns as number) + (report.failures as number));
      if ((report.failures as number) > 0) expect(report.firstFailure).toBe('RangeError: call 3 fails');
    }
  });

  it('a stop that comes while the lanes pause ends them before another call', async () => {
    const fleet = await probes(1, { tell: true });
    // Far longer than the stop takes to arrive: every lane is in its pause after its first call.
    const [report] = fleet.launch({ mode: 'lanes', lanes: 3, pauseMs: 2000, records: false });
    for (let i = 0; i < 3; i++) await fleet.member(0).take('called', 10_000);
    fleet.stop();
    expect((await report!).calls).toBe(3);
  });

  it('two runs at once in one process: each report goes to its own run', async () => {
    const fleet = await probes(1, { delayMs: 100 });
    const [slow] = fleet.launch({ mode: 'lanes', lanes: 1, calls: 3 });
    const [quick] = fleet.launch({ mode: 'burst', calls: 1 });
    // The quick run ends first; the slow one still gets its own three calls.
    expect((await quick!).records).toHaveLength(1);
    expect((await slow!).records).toHaveLength(3);
  });

  it('with settleMs, calls still pending are recorded as unsettled and the run is reported without them', async () => {
    const fleet = await probes(1, { delayMs: 60_000 });
    const [records] = await fleet.run({ mode: 'burst', calls: 3, settleMs: 50 });
    expect(records).toHaveLength(3);
    expect(records!.every((r) => !r.ok && r.name === 'Unsettled')).toBe(true);
  });

  it('close() ends a process that does not close by itself within its bound, and says so', async () => {
    const fleet = await probes(2, { hangOnClose: true });
    expect(await fleet.close(500)).toBe(false);
    expect(fleet.members.every((m) => !m.running)).toBe(true);
  });

  it('a scenario that fails to start fails Fleet.start, and no process is left', async () => {
    await expect(Fleet.start(PROBE, 2, { failStart: true })).rejects.toThrow(/the probe was told not to start/);
  });

  it('a bad plan or count is refused before anything is sent, naming the field', async () => {
    const fleet = await probes(1);
    const bad: [unknown, RegExp][] = [
      [{ mode: 'burst', calls: 0 }, /plan\.calls/],
      [{ mode: 'lanes', lanes: 1.5, calls: 1 }, /plan\.lanes/],
      [{ mode: 'lanes', lanes: 1, calls: 1, pauseMs: -1 }, /plan\.pauseMs/],
      [{ mode: 'open', intervalMs: 0, durationMs: 10 }, /plan\.intervalMs/],
      [{ mode: 'open', intervalMs: 1, durationMs: Infinity }, /plan\.durationMs/],
      [{ mode: 'open', intervalMs: 1, durationMs: 10, offsetMs: -1 }, /plan\.offsetMs/],
      [{ mode: 'burst', calls: 1, settleMs: Number.NaN }, /plan\.settleMs/],
      [{ mode: 'sometimes' }, /plan\.mode/],
    ];
    for (const [plan, message] of bad) expect(() => fleet.launch(plan as CallPlan)).toThrow(message);
    await expect(Fleet.start(PROBE, 0, {})).rejects.toThrow(/count/);
    // nothing was sent: the process still answers a run
    expect((await fleet.run({ mode: 'burst', calls: 1 }))[0]).toHaveLength(1);
  });
});
