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
//   agent-chat-ui    -> Regenerate: submit(undefined, { checkpoint: <parent of the answer's
//                       first state> }); Edit: submit(edited, { checkpoint: <parent of the
//                       question's first state> }); Reject: resume with { type: "reject" };
//                       branch switch: the history lists every branch (parent_checkpoint tree),
//                       and getState of the other branch's head reads it
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
  // (a checkpoint in options forks or regenerates from it, as useStream's submit does)
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
    checkpoint: options.checkpoint,
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

// agent-chat-ui's message actions, read from its thread/messages components: each names the
// checkpoint before the message's first state (`firstSeenState.parent_checkpoint`).
async function firstSeenParent(messageId) {
  const history = await client.threads.getHistory(threadId, { limit: 1000 });
  const seen = history.filter((s) => (s.values?.messages ?? []).some((m) => m.id === messageId));
  const first = seen[seen.length - 1]; // newest first: the oldest state holding it
  return first?.parent_checkpoint ?? null;
}

async function approveAll(result) {
  let out = result;
  while (out.interrupts.length) {
    const requests = out.interrupts[0].value?.action_requests ?? [{}];
    out = await submit(null, { command: { resume: { decisions: requests.map(() => ({ type: "approve" })) } } });
  }
  return out;
}

let flows = null;
if (resumed && !process.env.SKIP_FLOWS) {
  const answer = resumed.messages.filter((m) => m.type === "ai").at(-1);
  const regenerated = await approveAll(await submit(undefined, { checkpoint: await firstSeenParent(answer.id) }));
  const question = regenerated.messages.find((m) => m.type === "human");
  const edited = await submit(
    { messages: [{ type: "human", content: "write a note: edited milk" }] },
    { checkpoint: await firstSeenParent(question.id) },
  );
  const rejected = await submit(null, {
    command: { resume: { decisions: [{ type: "reject", message: "not now" }] } },
  });
  const history = await client.threads.getHistory(threadId, { limit: 1000 });
  const children = new Map();
  for (const state of history) {
    const parent = state.parent_checkpoint?.checkpoint_id ?? "";
    children.set(parent, (children.get(parent) ?? 0) + 1);
  }
  const forks = [...children.values()].filter((n) => n > 1).length;
  // switch to the first branch: its head is the regenerated answer's last state
  const other = history.find((s) => (s.values?.messages ?? []).some((m) => m.id === regenerated.messages.at(-1).id));
  const switched = await client.threads.getState(threadId, other.checkpoint.checkpoint_id);
  flows = {
    regenerated: regenerated.messages,
    edited: { interrupts: edited.interrupts.length, messages: edited.messages },
    rejected: rejected.messages,
    forks,
    switchedTo: (switched.values?.messages ?? []).map((m) => m.type),
  };
}
console.log(JSON.stringify({ assistantId, threadId, first, resumed, flows, threadStatus: thread.status }));
