// The context read (README "The context read"): what a new session of USER_ID in PROJECT_KEY
// should know, as the `## 长期记忆` block to put in its system prompt.
// Node 20, no framework, no dependency:
//   MEMORY_URL=http://127.0.0.1:${PORT:-5000} MEMORY_SERVICE_TOKEN=… USER_ID=1 PROJECT_KEY=mao node context.mjs
// Prints the HTTP status, then the answer's body, each on its own line; exits 1 unless 200.
// A server that is down or slow is one line on stderr: the session starts without memory.

const URL_BASE = process.env.MEMORY_URL ?? `http://127.0.0.1:${process.env.PORT ?? 5000}`;
const TOKEN = process.env.MEMORY_SERVICE_TOKEN;
const USER_ID = process.env.USER_ID ?? "1";
const PROJECT_KEY = process.env.PROJECT_KEY; // optional: without it, user-level memories only

/**
 * GET `path` with the platform's bearer token; prints status and body on separate lines.
 * @param {string} path
 * @returns {Promise<{status: number, body: any}>}
 */
async function api(path) {
  const response = await fetch(new URL(path, URL_BASE), {
    headers: { Authorization: `Bearer ${TOKEN}` },
    // A new session must not wait on memory: give up quickly and start without it.
    signal: AbortSignal.timeout(2000),
  });
  const text = await response.text();
  console.log(response.status);
  console.log(text.trim());
  return { status: response.status, body: text ? JSON.parse(text) : null };
}

/**
 * The block for a new session's system prompt; "" when there is nothing (or on any failure:
 * a session starts without memory rather than not at all).
 * @param {string} userId
 * @param {string | undefined} projectKey
 * @returns {Promise<string>}
 */
export async function memoryBlock(userId, projectKey) {
  const query = new URLSearchParams({ userId });
  if (projectKey) query.set("projectKey", projectKey);
  try {
    const { status, body } = await api(`/api/v1/internal/memory/context?${query}`);
    return status === 200 ? body.data.prompt : "";
  } catch (error) {
    console.error(unavailable(error));
    return "";
  }
}

/**
 * One line saying why there is no memory this time (no stack trace: nothing is broken here).
 * @param {unknown} error
 * @returns {string}
 */
function unavailable(error) {
  const cause = error instanceof Error ? error.cause : undefined;
  const why = cause?.code ?? cause?.errors?.[0]?.code ?? cause?.message
    ?? (error instanceof Error ? error.message : String(error));
  return `memory context unavailable (${why}): the session starts without memory`;
}

if (!TOKEN) {
  console.error("set MEMORY_SERVICE_TOKEN (the service's platform token)");
  process.exit(2);
}
const query = new URLSearchParams({ userId: USER_ID, ...(PROJECT_KEY && { projectKey: PROJECT_KEY }) });
try {
  const { status } = await api(`/api/v1/internal/memory/context?${query}`);
  process.exitCode = status === 200 ? 0 : 1;
} catch (error) {
  console.error(unavailable(error));
  process.exitCode = 1;
}
