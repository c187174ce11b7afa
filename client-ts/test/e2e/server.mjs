// A real `commerce-api serve --demo` for the end-to-end tests, on a free loopback port and a
// fresh SQLite file, plus a webhook receiver built on node:http. Everything is bounded in time.

import { execFile, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const REPO = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
export const COMMERCE_API = join(REPO, ".venv", "bin", "commerce-api");
export const HOST = "127.0.0.1";
const STARTUP_TIMEOUT_MS = 30_000;
const SHUTDOWN_TIMEOUT_MS = 10_000;

export const SKIP = existsSync(COMMERCE_API) ? false : `no ${COMMERCE_API}: run make install first`;

/** A shipping address the server accepts. */
export const ADDRESS = { street: "1 Main St", city: "Springfield", postal_code: "12345", country: "US" };

function lastLine(text) {
  return text.trim().split("\n").at(-1).trim();
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, HOST, () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `check` (async, truthy when done) every `everyMs` until `timeoutMs`; returns its value. */
export async function waitFor(check, { timeoutMs = 15_000, everyMs = 50, what = "the condition" } = {}) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const value = await check();
    if (value) return value;
    await sleep(everyMs);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

/**
 * Starts the server; resolves to `{ baseUrl, clientKey, adminKey, stop() }`. The client key is
 * the last line `serve --demo` prints; the admin key comes from `commerce-api keys create --admin`.
 * `env`: settings (`COMMERCE_*` variables) of this server, over the defaults.
 */
export async function startServer({ env: settings = {} } = {}) {
  const workdir = mkdtempSync(join(tmpdir(), "commerce-client-ts-"));
  const port = await freePort();
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("COMMERCE_")));
  Object.assign(env, {
    COMMERCE_DATABASE_URL: `sqlite:///${join(workdir, "ts.db")}`,
    COMMERCE_ENVIRONMENT: "sandbox",
    COMMERCE_WEBHOOK_POLL_SECONDS: "0.1",
    COMMERCE_WEBHOOK_TIMEOUT_SECONDS: "5",
    ...settings,
  });
  const child = spawn(COMMERCE_API, ["serve", "--host", HOST, "--port", String(port), "--demo"], {
    cwd: workdir,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (chunk) => (stdout += chunk));
  child.stderr.setEncoding("utf8").on("data", (chunk) => (stderr += chunk));
  const exited = new Promise((resolve) => child.once("exit", resolve));

  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), SHUTDOWN_TIMEOUT_MS);
      await exited;
      clearTimeout(timer);
    }
    rmSync(workdir, { recursive: true, force: true });
  };

  const origin = `http://${HOST}:${port}`;
  try {
    await waitFor(
      async () => {
        if (child.exitCode !== null) throw new Error(`the server exited (${child.exitCode}):\n${stderr.slice(-4000)}`);
        try {
          const response = await fetch(`${origin}/healthz`, { signal: AbortSignal.timeout(2_000) });
          return response.status === 200 && /sk_sandbox_/.test(stdout);
        } catch {
          return false;
        }
      },
      { timeoutMs: STARTUP_TIMEOUT_MS, everyMs: 100, what: `the server on ${origin}` },
    );
    const clientKey = lastLine(stdout);
    const { stdout: adminOut } = await promisify(execFile)(COMMERCE_API, ["keys", "create", "--admin"], {
      cwd: workdir,
      env,
      timeout: STARTUP_TIMEOUT_MS,
    });
    const adminKey = lastLine(adminOut);
    if (!clientKey.startsWith("sk_sandbox_") || !adminKey.startsWith("sk_sandbox_")) {
      throw new Error(`unexpected keys: ${clientKey.slice(0, 12)}…, ${adminKey.slice(0, 12)}…`);
    }
    return { baseUrl: `${origin}/v1`, origin, clientKey, adminKey, stop, stderr: () => stderr };
  } catch (error) {
    await stop();
    throw error;
  }
}

/**
 * A webhook receiver on 127.0.0.1, as an application would write it: it checks each delivery
 * with `verifyWebhook` against `secret()` and answers 200, or 400 when verification fails. It
 * records every delivery (raw body, headers, the verified event or the error).
 */
export async function startReceiver(verifyWebhook, secret) {
  const deliveries = [];
  const server = createServer((req, res) => {
    const chunks = [];
    req.on("data", (chunk) => chunks.push(chunk));
    req.on("end", async () => {
      const body = Buffer.concat(chunks);
      const delivery = { method: req.method, path: req.url, headers: req.headers, body, event: null, error: null };
      try {
        delivery.event = await verifyWebhook(body, req.headers, secret());
        res.writeHead(200).end();
      } catch (error) {
        delivery.error = error;
        res.writeHead(400).end(String(error));
      }
      deliveries.push(delivery);
    });
  });
  await new Promise((resolve) => server.listen(0, HOST, resolve));
  const { port } = server.address();
  return {
    url: `http://${HOST}:${port}/webhooks`,
    deliveries,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
