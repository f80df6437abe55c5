// Circuit breaker: after `failureThreshold` consecutive failures the gateway is presumed down and
// calls short-circuit for `cooldownMs` (costing a turn nothing). Then exactly one call is let
// through as a half-open probe: success closes the breaker, failure re-opens it.

export class CircuitBreaker {
  constructor({ failureThreshold = 3, cooldownMs = 30_000, now = Date.now } = {}) {
    this.failureThreshold = Math.max(1, failureThreshold);
    this.cooldownMs = Math.max(0, cooldownMs);
    this.now = now;
    this.state = "closed";
    this.failures = 0;
    this.openedAt = 0;
    this.probeInFlight = false;
  }

  /** True if a call may go ahead now. A true in half-open state makes the caller the probe. */
  tryAcquire() {
    if (this.state === "closed") return true;
    if (this.state === "open") {
      if (this.now() - this.openedAt < this.cooldownMs) return false;
      this.state = "half-open";
      this.probeInFlight = false;
    }
    if (this.probeInFlight) return false;
    this.probeInFlight = true;
    return true;
  }

  onSuccess() {
    this.state = "closed";
    this.failures = 0;
    this.probeInFlight = false;
  }

  onFailure() {
    this.probeInFlight = false;
    if (this.state === "half-open") {
      this.#open();
      return;
    }
    this.failures += 1;
    if (this.failures >= this.failureThreshold) this.#open();
  }

  /** The call ended without telling us anything about the gateway (the caller aborted it). */
  onNeutral() {
    this.probeInFlight = false;
  }

  #open() {
    this.state = "open";
    this.openedAt = this.now();
  }
}
