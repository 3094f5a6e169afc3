/**
 * What the product says about its user (issue 50): `touch()` on user activity and a busy
 * scope around work that must not be interrupted, sent with each heartbeat as
 * `idle_seconds` and `busy`; and the server's idle warning (`idle_reclaim_at`).
 *
 * A product that never touches sends no `idle_seconds`: the server then never finds it
 * idle. The keeper is woken (a timer set to now: a touch never waits on the network) when a
 * touch or a busy scope can cancel a warning, and when activity comes back to a seat
 * reclaimed for idleness (which is not asked for again until then).
 */

/** The contract's bound of `idle_seconds` (ten years): a clock gone wrong is sent as this. */
export const MAX_IDLE_SECONDS = 315_360_000;

/** The activity fields of one heartbeat and the touch (a `clock()` reading, ms) they report. @internal */
export interface Report {
  fields: { idle_seconds?: number; busy?: true };
  touch: number | undefined;
}

/** The last touch, the busy count and the warning the last renewal carried. @internal */
export class Activity {
  /** Milliseconds, monotonic (`performance.now()`). */
  readonly clock: () => number;
  /** Run the next step now (the keeper's). */
  wake: () => void = () => {};
  lastTouch: number | undefined;
  busyCount = 0;
  warned = false;
  // While warned: the touch the warned heartbeat reported, whether it said busy, and
  // whether a heartbeat was already woken for this warned answer (once: a product that
  // touches on every key press must not send a heartbeat for each).
  private warnedTouch: number | undefined;
  private warnedBusy = false;
  private woken = false;
  // The seat was reclaimed for idleness: asked for again on the next activity.
  private idleLost = false;
  private resume = false;

  constructor(clock: () => number = () => performance.now()) {
    this.clock = clock;
  }

  touch(secondsAgo = 0): void {
    if (typeof secondsAgo !== "number" || !Number.isFinite(secondsAgo) || secondsAgo < 0) {
      throw new RangeError("touch(secondsAgo): a finite, non-negative number of seconds");
    }
    this.lastTouch = this.clock() - secondsAgo * 1000;
    if (this.shouldWake()) this.wake();
  }

  beginBusy(): void {
    this.busyCount += 1;
    if (this.shouldWake()) this.wake();
  }

  endBusy(): void {
    if (this.busyCount <= 0) throw new Error("endBusy() without a beginBusy()");
    this.busyCount -= 1;
  }

  /**
   * Whether a heartbeat now is worth sending: the seat lost for idleness is to be asked for
   * again (once), or a warning can be cancelled by what the warned heartbeat did not say: a
   * touch at least a second newer than the one it reported (a whole second less idle), or
   * busy. Once per warned answer.
   */
  private shouldWake(): boolean {
    if (this.idleLost) {
      const wake = !this.resume;
      this.resume = true;
      return wake;
    }
    if (!this.warned || this.woken) return false;
    const newer = this.lastTouch !== undefined && (this.warnedTouch === undefined || this.lastTouch >= this.warnedTouch + 1000);
    this.woken = newer || (this.busyCount > 0 && !this.warnedBusy);
    return this.woken;
  }

  report(): Report {
    const fields: Report["fields"] = {};
    if (this.lastTouch !== undefined) {
      const idle = Math.max(0, Math.floor((this.clock() - this.lastTouch) / 1000));
      fields.idle_seconds = Math.min(idle, MAX_IDLE_SECONDS);
    }
    if (this.busyCount > 0) fields.busy = true;
    return { fields, touch: this.lastTouch };
  }

  /** A renewal's answer, warned or not, to the heartbeat that said `sent`: true when another should go at once (activity came while the warned one was on its way). */
  renewed(warned: boolean, sent: Report): boolean {
    this.warned = warned;
    this.woken = false;
    this.warnedTouch = warned ? sent.touch : undefined;
    this.warnedBusy = sent.fields.busy === true;
    return warned && this.shouldWake();
  }

  lostForIdleness(): void {
    this.idleLost = true;
    this.resume = false;
    this.warned = false;
    this.warnedTouch = undefined;
    this.woken = false;
  }

  /** The seat was reclaimed for idleness and no activity came since: not asked for. */
  awaitsActivity(): boolean {
    return this.idleLost && !this.resume;
  }

  regained(): void {
    this.idleLost = false;
    this.resume = false;
  }
}
