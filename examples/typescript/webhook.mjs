// The completion webhook (README "The completion webhook"), signed as Standard Webhooks defines
// it, with the specification's own library (npm `standardwebhooks`): what a platform sends when
// a task of USER_ID ends. Node 20, no framework:
//   npm install   # once, in this folder
//   MEMORY_URL=http://127.0.0.1:${PORT:-5000} MEMORY_WEBHOOK_SECRET=… USER_ID=1 PROJECT_KEY=mao node webhook.mjs
// Every run is a new completion (a fresh eventId), unless EVENT_ID names one to deliver again
// (the service then answers `duplicate_event`). Prints the HTTP status, then the answer's body,
// each on its own line; exits 1 unless 2xx.

import { randomInt, randomUUID } from "node:crypto";
import { Webhook } from "standardwebhooks";

const URL_BASE = process.env.MEMORY_URL ?? `http://127.0.0.1:${process.env.PORT ?? 5000}`;
const SECRET = process.env.MEMORY_WEBHOOK_SECRET;
const PATH = "/api/v1/webhooks/task-completed";

if (!SECRET) {
  console.error("set MEMORY_WEBHOOK_SECRET (the service's webhook secret)");
  process.exit(2);
}
// A `whsec_<base64>` secret is what the library generates and decodes; any other secret is
// used as its UTF-8 bytes, as the service does.
const signer = SECRET.startsWith("whsec_")
  ? new Webhook(SECRET)
  : new Webhook(new TextEncoder().encode(SECRET), { format: "raw" });

/**
 * POST one completion event, signed now; prints status and body on separate lines.
 * Deliver the same event again (same eventId, same body, a new signature) after a timeout, a
 * network error or a 5xx: the service answers a copy it has already recorded with
 * `duplicate_event` and enqueues nothing twice.
 * @param {Record<string, unknown> & {eventId: string}} event
 * @returns {Promise<{status: number, body: any}>}
 */
export async function deliver(event) {
  const body = JSON.stringify(event);
  const now = new Date();
  const response = await fetch(new URL(PATH, URL_BASE), {
    method: "POST",
    headers: {
      "Content-Type": "application/json",
      "webhook-id": event.eventId, // must be the body's eventId
      "webhook-timestamp": String(Math.floor(now.getTime() / 1000)),
      "webhook-signature": signer.sign(event.eventId, now, body),
    },
    body,
    signal: AbortSignal.timeout(10_000),
  });
  const text = await response.text();
  console.log(response.status);
  console.log(text.trim());
  return { status: response.status, body: text ? JSON.parse(text) : null };
}

const event = {
  eventId: process.env.EVENT_ID ?? `ts-${randomUUID()}`,
  sessionId: Number(process.env.SESSION_ID ?? randomInt(1, 2 ** 31 - 1)),
  userId: Number(process.env.USER_ID ?? "1"), // auto-capture must be on for this user
  projectKey: process.env.PROJECT_KEY ?? null,
  workspace: null,
  sessionType: "NORMAL",
  channel: "WEB",
  phase: "COMPLETED",
  lastUserMessage: process.env.USER_MESSAGE ?? "以后报告都用中文写,我们这个仓库统一用 pnpm 管理依赖",
  lastAssistantMessage: process.env.ANSWER ?? "好的,报告已用中文写好,依赖也改用 pnpm 安装了。",
};
const { status } = await deliver(event);
process.exitCode = status >= 200 && status < 300 ? 0 : 1;
