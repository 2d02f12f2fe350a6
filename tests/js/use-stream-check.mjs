// Drive an Agent Protocol server with @langchain/langgraph-sdk the way React's `useStream`
// (and so agent-chat-ui) does, without React: the same client calls in the same order, read
// from the sdk's react/stream.lgp.js and ui/manager.js.
//
//   submit(values)   -> threads.create() (first time), then runs.stream(thread, assistant,
//                       { input, streamMode: ["values", "messages-tuple", "updates"],
//                         onDisconnect: "cancel", streamResumable: false, onRunCreated })
//   while streaming  -> "values" replace the state (an `__interrupt__` values chunk is merged
//                       in, not replacing it); "messages" [chunk, metadata] tuples build the
//                       message being written
//   after the run    -> threads.getHistory(thread, { limit: 10 }) (fetchStateHistory), whose
//                       head's tasks[].interrupts give `stream.interrupt` when the values have
//                       none
//   resume           -> submit(null, { command: { resume } }) on the same thread
//
// Usage: node use-stream-check.mjs URL [PROMPT] ; env ASSISTANT_ID, API_KEY (sent as
// X-Api-Key), BEARER (sent as Authorization: Bearer). Prints one JSON summary on stdout.

import { Client } from "@langchain/langgraph-sdk";

const [apiUrl, prompt = "write a note: buy milk"] = process.argv.slice(2);
if (!apiUrl) {
  console.error("usage: node use-stream-check.mjs URL [PROMPT]");
  process.exit(2);
}
const defaultHeaders = process.env.BEARER ? { Authorization: `Bearer ${process.env.BEARER}` } : {};
const client = new Client({ apiUrl, apiKey: process.env.API_KEY ?? null, defaultHeaders });

const assistants = await client.assistants.search({ limit: 10 });
const assistantId = process.env.ASSISTANT_ID ?? assistants[0]?.assistant_id;
if (!assistantId) throw new Error("the server lists no assistant");

let threadId = null;

function interruptsOf(values, history) {
  // useStream's `interrupts` getter: the values' `__interrupt__`, else the thread head's tasks.
  if (values && Array.isArray(values.__interrupt__)) return values.__interrupt__;
  const head = history?.[0];
  return (head?.tasks ?? []).flatMap((task) => task.interrupts ?? []);
}

async function submit(input, options = {}) {
  if (!threadId) {
    threadId = (await client.threads.create({ metadata: { source: "use-stream-check" } })).thread_id;
  }
  let values = null;
  let runId = null;
  const eventNames = [];
  const tokens = new Map(); // message id -> text streamed for it (messages-tuple)
  const stream = client.runs.stream(threadId, assistantId, {
    input,
    command: options.command,
    streamMode: ["values", "messages-tuple", "updates"],
    onDisconnect: "cancel",
    streamResumable: false,
    onRunCreated(params) {
      runId = params.run_id;
    },
  });
  for await (const { event, data } of stream) {
    eventNames.push(event);
    if (event === "error") throw new Error(`stream error: ${JSON.stringify(data)}`);
    if (event === "values") {
      if (data && "__interrupt__" in data) values = { ...(values ?? {}), __interrupt__: data.__interrupt__ };
      else values = values && Array.isArray(values.__interrupt__) ? { ...data, __interrupt__: values.__interrupt__ } : data;
    }
    if (event === "messages") {
      const [chunk] = data;
      if (chunk?.type === "AIMessageChunk" && typeof chunk.content === "string") {
        tokens.set(chunk.id, (tokens.get(chunk.id) ?? "") + chunk.content);
      }
    }
    if (event === "updates" && data && "__interrupt__" in data) {
      values = { ...(values ?? {}), __interrupt__: data.__interrupt__ };
    }
  }
  const history = await client.threads.getHistory(threadId, { limit: 10 });
  const interrupts = interruptsOf(values, history);
  const messages = (history[0]?.values?.messages ?? values?.messages ?? []).map((m) => ({
    type: m.type,
    id: m.id,
    content: typeof m.content === "string" ? m.content : JSON.stringify(m.content),
    tool_calls: m.tool_calls?.map((c) => c.name) ?? [],
  }));
  return {
    runId,
    metadataFirst: eventNames[0] === "metadata",
    events: [...new Set(eventNames)],
    tokenChunks: eventNames.filter((e) => e === "messages").length,
    streamedTexts: Object.fromEntries(tokens),
    interrupts: interrupts.map((i) => ({ id: i.id, value: i.value })),
    historyLength: history.length,
    messages,
  };
}

const first = await submit({ messages: [{ type: "human", content: prompt }] });
let resumed = null;
if (first.interrupts.length) {
  const request = first.interrupts[0].value ?? {};
  const decisions = (request.action_requests ?? [{}]).map(() => ({ type: "approve" }));
  resumed = await submit(null, { command: { resume: { decisions } } });
}
const thread = await client.threads.get(threadId);
console.log(JSON.stringify({ assistantId, threadId, first, resumed, threadStatus: thread.status }));
