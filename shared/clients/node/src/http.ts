/**
 * One HTTP exchange with node:http and node:https (no runtime dependency, no global
 * `fetch`, which follows redirects by default and ignores the environment's proxy): the
 * whole exchange (connect, the proxy's tunnel, TLS, headers and body) bounded by one
 * timer; redirects never followed (the caller reads the 3xx); a body larger than
 * `MAX_ANSWER_BYTES` refused; through a proxy when one is configured (the `proxy` option,
 * else HTTPS_PROXY / HTTP_PROXY and NO_PROXY): an https URL through a CONNECT tunnel
 * (then TLS to the server over it, so the proxy sees neither the API key nor the
 * answers), an http URL as an absolute-form request to the proxy.
 */

import * as http from "node:http";
import * as https from "node:https";
import { isIP } from "node:net";
import * as tls from "node:tls";

import { InvalidResponse } from "./errors.js";
import type { AbortSignalLike } from "./transport.js";

/** An answer read whole. `headers`: lowercase names. */
export interface HttpAnswer {
  status: number;
  statusText: string;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** Larger answers are refused (`invalid_response`): seatlease's are a few hundred bytes. */
export const MAX_ANSWER_BYTES = 1 << 20;

/** What went wrong on the way (no answer): the caller makes it a `BackendUnavailable`. */
export class ExchangeFailed extends Error {}

export interface ExchangeOptions {
  method: "GET" | "POST";
  headers: Record<string, string>;
  body?: string;
  timeoutMs: number;
  signal?: AbortSignalLike | undefined;
  /** The proxy to go through, if any (see `proxyFor`). */
  proxy?: URL | undefined;
  /** The keep-alive agents of direct connections. */
  agents?: { http: http.Agent; https: https.Agent } | undefined;
  /** Extra trusted CA certificates (PEM) for https. */
  ca?: string | string[] | undefined;
}

/** The host name of a URL as the socket APIs want it ("[::1]" -> "::1"). */
function bareHost(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, "$1");
}

function defaultPort(url: URL): number {
  if (url.port) return Number(url.port);
  return url.protocol === "https:" ? 443 : 80;
}

function proxyAuthorization(proxy: URL): Record<string, string> {
  if (!proxy.username && !proxy.password) return {};
  const credentials = `${decodeURIComponent(proxy.username)}:${decodeURIComponent(proxy.password)}`;
  return { "Proxy-Authorization": `Basic ${Buffer.from(credentials).toString("base64")}` };
}

/** Whether NO_PROXY (comma or space separated: `*`, host names, `.domain`, `host:port`, IP addresses) exempts `target`. */
export function noProxyMatches(target: URL, noProxy: string | undefined): boolean {
  if (!noProxy) return false;
  const host = bareHost(target).toLowerCase();
  const port = String(defaultPort(target));
  for (const raw of noProxy.split(/[\s,]+/)) {
    let entry = raw.trim().toLowerCase();
    if (!entry) continue;
    if (entry === "*") return true;
    let entryPort: string | undefined;
    const bracketed = /^\[(.*)\](?::(\d+))?$/.exec(entry);
    if (bracketed) {
      entry = bracketed[1] ?? "";
      entryPort = bracketed[2];
    } else if (isIP(entry) !== 6) {
      const cut = entry.lastIndexOf(":");
      if (cut > 0) [entry, entryPort] = [entry.slice(0, cut), entry.slice(cut + 1)];
    }
    if (entryPort !== undefined && entryPort !== port) continue;
    if (entry.startsWith("*.")) entry = entry.slice(1);
    if (entry.startsWith(".") ? host.endsWith(entry) || host === entry.slice(1) : host === entry || host.endsWith(`.${entry}`)) return true;
  }
  return false;
}

/**
 * The proxy for `target`: `option` when it is a URL, none when it is `false` or "", else
 * the environment's (`https_proxy`/`HTTPS_PROXY` for an https URL, `http_proxy`/`HTTP_PROXY`
 * for an http one) unless `no_proxy`/`NO_PROXY` exempts the host.
 */
export function proxyFor(target: URL, option: string | false | undefined, env: Record<string, string | undefined> = process.env): URL | undefined {
  let chosen: string | undefined;
  if (option === false || option === "") return undefined;
  if (option !== undefined) {
    chosen = option;
  } else {
    chosen = target.protocol === "https:" ? (env["https_proxy"] ?? env["HTTPS_PROXY"]) : (env["http_proxy"] ?? env["HTTP_PROXY"]);
    if (!chosen || noProxyMatches(target, env["no_proxy"] ?? env["NO_PROXY"])) return undefined;
  }
  const proxy = new URL(chosen.includes("://") ? chosen : `http://${chosen}`);
  if (proxy.protocol !== "http:") throw new TypeError(`proxy ${proxy.protocol}//${proxy.host}: only http:// proxies are supported`);
  return proxy;
}

/** One request, its answer read whole within `timeoutMs` (rejects with an `ExchangeFailed`, an `InvalidResponse`, or the signal's reason). */
export function exchange(target: URL, options: ExchangeOptions): Promise<HttpAnswer> {
  const { signal, proxy } = options;
  return new Promise<HttpAnswer>((resolve, reject) => {
    const parts: { destroy(): void }[] = []; // requests and sockets to end on failure
    let settled = false;
    const settle = (error: unknown, answer?: HttpAnswer) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      if (answer !== undefined && error === undefined) {
        resolve(answer);
        return;
      }
      for (const part of parts) part.destroy();
      reject(error);
    };
    const fail = (error: unknown) => settle(error instanceof Error && !(error instanceof InvalidResponse) && !(error instanceof ExchangeFailed) ? new ExchangeFailed((error as Error).message || String(error)) : error);
    const timer = setTimeout(() => settle(new ExchangeFailed(`timed out after ${options.timeoutMs} ms`)), options.timeoutMs);
    const onAbort = () => settle(signal?.reason ?? new Error("aborted"));
    if (signal?.aborted) {
      onAbort();
      return;
    }
    signal?.addEventListener("abort", onAbort, { once: true });

    const secure = target.protocol === "https:";
    const host = bareHost(target);
    const port = defaultPort(target);
    const headers: Record<string, string> = { ...options.headers, Host: target.host };
    if (options.body !== undefined) headers["Content-Length"] = String(Buffer.byteLength(options.body));

    const onResponse = (response: http.IncomingMessage) => {
      const chunks: Buffer[] = [];
      let size = 0;
      response.on("data", (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_ANSWER_BYTES) settle(new InvalidResponse(response.statusCode ?? 0, "invalid_response", `${target.href} answered more than ${MAX_ANSWER_BYTES} bytes`));
        else chunks.push(chunk);
      });
      response.on("end", () => {
        settle(undefined, {
          status: response.statusCode ?? 0,
          statusText: response.statusMessage ?? "",
          headers: response.headers,
          text: Buffer.concat(chunks).toString("utf8"),
        });
      });
      response.on("error", fail);
      response.on("close", () => {
        if (!response.complete) fail(new ExchangeFailed("the connection closed in the middle of the answer"));
      });
    };
    const send = (request: http.ClientRequest) => {
      parts.push(request);
      request.on("error", fail);
      request.end(options.body);
    };

    if (proxy === undefined) {
      const module = secure ? https : http;
      const agent = options.agents === undefined ? undefined : secure ? options.agents.https : options.agents.http;
      const extra = secure && options.ca !== undefined && agent === undefined ? { ca: options.ca } : {};
      send(module.request({ host, port, path: `${target.pathname}${target.search}`, method: options.method, headers, agent, ...extra }, onResponse));
      return;
    }
    const proxyHost = bareHost(proxy);
    const proxyPort = defaultPort(proxy);
    if (!secure) {
      // An http URL: the absolute-form request to the proxy (what every HTTP proxy forwards).
      send(http.request({ host: proxyHost, port: proxyPort, path: target.href, method: options.method, headers: { ...headers, ...proxyAuthorization(proxy) }, agent: false }, onResponse));
      return;
    }
    const authority = `${host.includes(":") ? `[${host}]` : host}:${port}`;
    const connect = http.request({ host: proxyHost, port: proxyPort, method: "CONNECT", path: authority, headers: { Host: authority, ...proxyAuthorization(proxy) }, agent: false });
    parts.push(connect);
    connect.on("error", fail);
    connect.on("connect", (answer: http.IncomingMessage, socket) => {
      parts.push(socket);
      if (answer.statusCode !== 200) {
        fail(new ExchangeFailed(`the proxy ${proxy.host} refused the tunnel to ${authority}: ${answer.statusCode} ${answer.statusMessage ?? ""}`.trim()));
        return;
      }
      // The certificate is checked against the target's host (`host`; SNI only for a
      // name): without it Node checks it against the socket's, the proxy's host.
      const secured = tls.connect({ socket, host, ...(isIP(host) ? {} : { servername: host }), ...(options.ca !== undefined ? { ca: options.ca } : {}) });
      parts.push(secured);
      secured.on("error", fail);
      send(https.request({ host, port, path: `${target.pathname}${target.search}`, method: options.method, headers, createConnection: () => secured }, onResponse));
    });
    connect.end();
  });
}
