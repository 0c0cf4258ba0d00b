// Time limits kept by two clocks. The wall clock (Date.now) can be stepped
// back, by NTP or by hand, and would then stretch every limit by the step;
// the monotonic clock (performance.now, what timers run on) cannot, but it
// stops while the machine is suspended, and a laptop that slept past a
// session's end or unlock_max must wake with them over. A limit is reached
// when either clock says so.

export interface Clocks {
  wall: () => number;
  mono: () => number;
}

export const SYSTEM_CLOCKS: Clocks = { wall: Date.now, mono: () => performance.now() };

export interface TwoClockDeadline {
  wallAt: number; // ms since the epoch: what is shown and journaled
  monoAt: number;
}

export function deadlineIn(ms: number, clocks: Clocks = SYSTEM_CLOCKS): TwoClockDeadline {
  return { wallAt: clocks.wall() + ms, monoAt: clocks.mono() + ms };
}

export function passed(d: TwoClockDeadline, clocks: Clocks = SYSTEM_CLOCKS): boolean {
  return clocks.mono() >= d.monoAt || clocks.wall() >= d.wallAt;
}
