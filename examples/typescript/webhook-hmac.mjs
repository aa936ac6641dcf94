// The completion webhook signed with the service's own headers (SPEC §5) instead of Standard
// Webhooks: `X-Memory-Timestamp` and `X-Memory-Signature: sha256=<hex HMAC-SHA256(secret,
// "<timestamp>.<raw body>")>`, with node:crypto only. Same variables and output as webhook.mjs:
//   MEMORY_URL=… MEMORY_WEBHOOK_SECRET=… USER_ID=1 PROJECT_KEY=mao node webhook-hmac.mjs

import { createHmac, randomInt, randomUUID } from "node:crypto";

const URL_BASE = process.env.MEMORY_URL ?? `http://127.0.0.1:${process.env.PORT ?? 5000}`;
const SECRET = process.env.MEMORY_WEBHOOK_SECRET;
const PATH = "/api/v1/webhooks/task-completed";

if (!SECRET) {
  console.error("set MEMORY_WEBHOOK_SECRET (the service's webhook secret)");
  process.exit(2);
}

/**
 * POST one completion event with the X-Memory headers; prints status and body on separate
 * lines. The signature covers the exact bytes sent, so sign the string you send.
 * @param {Record<string, unknown> & {eventId: string}} event
 * @returns {Promise<{status: number, body: any}>}
 */
export async function deliver(event) {
  const body = JSON.stringify(event);
  const timestamp = String(Math.floor(Date.now() / 1000));
  const digest = createHmac("sha256", SECRET).update(`${timestamp}.${body}`).digest("hex");
  const response = await fetch(new URL(PATH, URL_BASE), {
    method: "POST",
    headers: {
      "Content-Type": "application/json",
      "X-Memory-Timestamp": timestamp,
      "X-Memory-Signature": `sha256=${digest}`,
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
