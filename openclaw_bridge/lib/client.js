// HTTP client for the memory gateway. Every call has its own timeout, goes through the circuit
// breaker and resolves to a result object: it never throws and never rejects, so a hook handler
// cannot fail because the gateway did.
//
// Result: { ok: true, status, data } or { ok: false, reason, status? }.

import { CircuitBreaker } from "./breaker.js";

const DEFAULT_TIMEOUT_MS = 5_000;

export class GatewayClient {
  /** `apiKey` is the token, or a function returning it (read when each request is sent). */
  constructor({ baseUrl, apiKey = "", breaker = new CircuitBreaker(), fetchImpl } = {}) {
    this.baseUrl = String(baseUrl).replace(/\/+$/, "");
    this.apiKey = apiKey;
    this.breaker = breaker;
    this.fetchImpl = fetchImpl ?? globalThis.fetch;
  }

  post(path, body, options = {}) {
    return this.request("POST", path, body, options);
  }

  /** GET /health without the breaker: used to decide whether a gateway is there at all. */
  async health(timeoutMs = 1_000) {
    const result = await this.request("GET", "/health", undefined, { timeoutMs, bypassBreaker: true });
    return result.ok;
  }

  /**
   * GET /health, as { ok, data } or { ok: false, reason, refused }. `refused` is true only when
   * nothing listens on the port: the one case where starting a gateway is right. Through the
   * breaker unless `bypassBreaker` (polling a gateway that is starting must not trip it).
   */
  async probe(timeoutMs = 1_000, { bypassBreaker = false, countSuccess = true } = {}) {
    const result = await this.request("GET", "/health", undefined, { timeoutMs, bypassBreaker, countSuccess });
    if (result.ok) return { ok: true, data: result.data && typeof result.data === "object" ? result.data : {} };
    return { ...result, refused: /ECONNREFUSED/.test(result.reason ?? "") };
  }

  #token() {
    try {
      return typeof this.apiKey === "function" ? this.apiKey() || "" : this.apiKey;
    } catch {
      return "";
    }
  }

  /**
   * `countSuccess: false`: a success says nothing about the route the caller is after (a
   * /health check before a call), so it must not close the breaker; a failure still counts.
   */
  async request(method, path, body, { timeoutMs = DEFAULT_TIMEOUT_MS, signal, bypassBreaker = false, countSuccess = true } = {}) {
    if (!bypassBreaker && !this.breaker.tryAcquire()) {
      return { ok: false, reason: "circuit-open" };
    }
    const outcome = await this.#send(method, path, body, timeoutMs, signal);
    if (!bypassBreaker) {
      if (outcome.verdict === "success" && countSuccess) this.breaker.onSuccess();
      else if (outcome.verdict === "failure") this.breaker.onFailure();
      else this.breaker.onNeutral();
    }
    return outcome.result;
  }

  // verdict: how the call counts for the breaker. 4xx means the gateway is alive and answering,
  // so it counts as a success even though the call itself failed.
  async #send(method, path, body, timeoutMs, callerSignal) {
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, timeoutMs);
    // A pending timer must never keep a one-shot CLI process alive.
    timer.unref?.();
    const onCallerAbort = () => controller.abort();
    if (callerSignal) {
      if (callerSignal.aborted) controller.abort();
      else callerSignal.addEventListener("abort", onCallerAbort, { once: true });
    }
    try {
      const headers = { accept: "application/json" };
      if (body !== undefined) headers["content-type"] = "application/json";
      const token = this.#token();
      if (token) headers.authorization = `Bearer ${token}`;
      const response = await this.fetchImpl(this.baseUrl + path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: controller.signal,
      });
      // The body is read under the same timeout: a gateway that stalls mid-answer is slow too.
      const text = await response.text();
      const data = parseJson(text);
      if (response.ok) {
        if (data === undefined) {
          return failure(`bad answer from ${path}: not JSON`, response.status);
        }
        return { verdict: "success", result: { ok: true, status: response.status, data } };
      }
      const message = (data && typeof data.error === "string" && data.error) || text.slice(0, 200);
      const reason = `http ${response.status}: ${message}`;
      if (response.status >= 500) return failure(reason, response.status);
      return { verdict: "success", result: { ok: false, reason, status: response.status } };
    } catch (error) {
      if (timedOut) return failure(`timeout after ${timeoutMs}ms`);
      if (callerSignal?.aborted) return { verdict: "neutral", result: { ok: false, reason: "aborted" } };
      return failure(`unreachable: ${describeError(error)}`);
    } finally {
      clearTimeout(timer);
      callerSignal?.removeEventListener?.("abort", onCallerAbort);
    }
  }
}

function failure(reason, status) {
  const result = { ok: false, reason };
  if (status !== undefined) result.status = status;
  return { verdict: "failure", result };
}

function parseJson(text) {
  if (!text) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

// fetch wraps socket errors ("fetch failed"); the useful part is the cause's code.
function describeError(error) {
  const cause = error?.cause;
  const code = cause?.code || error?.code;
  if (code) return code;
  return String(cause?.message || error?.message || error);
}
