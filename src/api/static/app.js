// artifactflow web page: conversations, chat with a streaming answer, timeline, permissions,
// artifacts, branches. Plain ES modules, no build step.
//
// Streaming: one EventSource per followed message. Stored events carry `id:`, so the browser's
// own reconnect sends Last-Event-ID; when the browser gives up (server down, 204), we check the
// message and reconnect with ?after=<last seen id>. Every stored event is applied once: events
// with an id not above the last seen one are dropped. `llm_chunk` deltas carry no id; text lost
// in a reconnect comes back with `llm_complete` / `complete`.

import { api, ApiError, enc, getToken, onUnauthorized, setToken, streamUrl } from "./api.js";
import { ArtifactPanel } from "./artifacts.js";
import { escapeHtml, plainInto, renderInto } from "./markdown.js";
import { MemoryPanel } from "./memory.js";
import { PermissionDialog } from "./permissions.js";
import { stepOf, streamInto } from "./progress.js";
import { Timeline } from "./timeline.js";

const EVENT_TYPES = [
  "metadata", "agent_start", "llm_chunk", "llm_complete", "agent_complete", "tool_start", "tool_complete",
  "permission_request", "permission_result", "subagent_start", "subagent_complete", "artifact_created",
  "artifact_updated", "complete", "cancelled", "error", "workflow_node_start", "workflow_node_complete", "handoff",
  "context_compacted", "memory_recalled",
];
const ENDS = new Set(["complete", "error", "cancelled"]);
const PAGE = 30;
const $ = (id) => document.getElementById(id);

const state = {
  conversationId: null,
  nodes: new Map(), // message id -> tree node (+ live fields: text, error)
  roots: [],
  choice: new Map(), // parent id ("" for roots) -> chosen child: the branch shown
  selected: null, // message whose timeline is shown
  editing: null, // {id, draft}: a user message being edited (to fork)
  stream: null, // {messageId, lastId, source, timer, done}
  offset: 0,
};

const timeline = new Timeline($("timeline"), $("timeline-subject"));
const artifacts = new ArtifactPanel();
const memories = new MemoryPanel();
const permissions = new PermissionDialog({
  onResumed: (messageId, after) => {
    const node = state.nodes.get(messageId);
    if (node) node.status = "running";
    renderMessages();
    follow(messageId, after);
  },
  onGone: () => openConversation(state.conversationId),
});

// --- connection indicator and errors -----------------------------------------------------------

function setConnection(kind, text = kind) {
  const badge = $("connection");
  badge.className = `connection ${kind}`;
  badge.textContent = text;
}

function report(err) {
  if (err instanceof ApiError && err.status === 401) return; // the token dialog is up
  console.error(err);
  setConnection("reconnecting", err.message.slice(0, 60));
}

// --- auth --------------------------------------------------------------------------------------

onUnauthorized((message) => {
  $("token-button").hidden = false;
  $("token-error").textContent = getToken() ? message : "";
  if (!$("token-dialog").open) $("token-dialog").showModal();
});
$("token-button").addEventListener("click", () => $("token-dialog").showModal());
$("timeline-widen").addEventListener("click", () => {
  const wide = document.body.classList.toggle("timeline-wide");
  $("timeline-widen").setAttribute("aria-pressed", String(wide));
  $("timeline-widen").textContent = wide ? "Narrow ⤡" : "Widen ⤢";
});
$("token-form").addEventListener("submit", (e) => {
  e.preventDefault();
  setToken($("token-input").value.trim());
  $("token-dialog").close();
  start();
});

// --- conversations -----------------------------------------------------------------------------

async function loadConversations(more = false) {
  state.offset = more ? state.offset + PAGE : 0;
  const page = await api(`/conversations?limit=${PAGE}&offset=${state.offset}`);
  const list = $("conversations");
  if (!more) list.replaceChildren();
  for (const conversation of page.items) {
    const item = document.createElement("li");
    item.dataset.id = conversation.id;
    item.classList.toggle("current", conversation.id === state.conversationId);
    item.innerHTML = `<span class="title">${escapeHtml(conversation.title || "Untitled")}</span>
      <button class="link delete" type="button" title="Delete conversation">✕</button>`;
    item.addEventListener("click", () => openConversation(conversation.id).catch(report));
    item.querySelector(".delete").addEventListener("click", (e) => {
      e.stopPropagation();
      deleteConversation(conversation.id).catch(report);
    });
    list.append(item);
  }
  $("more-conversations").hidden = state.offset + page.items.length >= page.total;
}

async function deleteConversation(id) {
  if (!confirm("Delete this conversation, its messages and artifacts?")) return;
  await api(`/conversations/${enc(id)}`, { method: "DELETE" });
  if (id === state.conversationId) newChat();
  await loadConversations();
}

function newChat() {
  closeStream();
  permissions.hide();
  state.conversationId = null;
  state.nodes.clear();
  state.roots = [];
  state.choice.clear();
  state.selected = null;
  state.editing = null;
  history.replaceState(null, "", location.pathname);
  timeline.reset(null);
  renderMessages();
  artifacts.load(null);
  markCurrent();
  $("input").focus();
}

function markCurrent() {
  for (const item of $("conversations").children) {
    item.classList.toggle("current", item.dataset.id === state.conversationId);
  }
}

async function openConversation(id) {
  if (id !== state.conversationId) {
    closeStream();
    permissions.hide();
    state.choice.clear();
    state.editing = null;
  }
  state.conversationId = id;
  history.replaceState(null, "", `#c=${id}`);
  markCurrent();
  await refreshTree();
  const path = currentPath();
  if (path.length) await selectMessage(path[path.length - 1]);
  await artifacts.load(id);
}

async function refreshTree() {
  const tree = await api(`/conversations/${enc(state.conversationId)}`);
  for (const node of tree.messages) {
    const old = state.nodes.get(node.id);
    state.nodes.set(node.id, old ? Object.assign(old, node) : node);
  }
  state.roots = tree.roots;
  renderMessages();
}

// The branch shown: from the roots down, the chosen child, else the active one, else the newest.
function currentPath() {
  const path = [];
  let siblings = state.roots;
  let parent = "";
  while (siblings.length) {
    const chosen = state.choice.get(parent);
    const id = siblings.includes(chosen)
      ? chosen
      : siblings.find((s) => state.nodes.get(s)?.active) || siblings[siblings.length - 1];
    path.push(id);
    siblings = state.nodes.get(id)?.children || [];
    parent = id;
  }
  return path;
}

// --- rendering ---------------------------------------------------------------------------------

function siblingsOf(node) {
  return node.parent_id ? state.nodes.get(node.parent_id)?.children || [node.id] : state.roots;
}

function renderMessages() {
  const box = $("messages");
  const path = currentPath();
  // A re-render while someone edits keeps their caret or selection, not only the draft: typing
  // (or replacing a selection) goes on where it was instead of at the end of the text.
  const old = box.querySelector(".edit-box textarea");
  const caret =
    old && document.activeElement === old
      ? [old.selectionStart, old.selectionEnd, old.selectionDirection]
      : null;
  box.replaceChildren();
  if (!path.length) {
    box.innerHTML = `<div id="empty" class="empty"><h1>What should the agents work on?</h1>
      <p>Answers stream in as they are written. Risky tools ask for your approval first.</p></div>`;
    return;
  }
  for (const id of path) {
    const turn = renderTurn(state.nodes.get(id));
    box.append(turn);
    if (turn.editor) {
      turn.editor.focus();
      if (caret) turn.editor.setSelectionRange(...caret);
    }
  }
  if (!state.editing) box.scrollTop = box.scrollHeight;
}

function renderTurn(node) {
  const turn = document.createElement("div");
  turn.className = "turn";
  turn.dataset.id = node.id;
  turn.classList.toggle("selected", node.id === state.selected);
  const siblings = siblingsOf(node);
  const index = siblings.indexOf(node.id);
  const nav =
    siblings.length > 1
      ? `<span class="branch-nav"><button class="link prev" type="button" title="Previous branch"${index === 0 ? " disabled" : ""}>‹</button>
         ${index + 1}/${siblings.length}
         <button class="link next" type="button" title="Next branch"${index === siblings.length - 1 ? " disabled" : ""}>›</button></span>`
      : "";
  turn.innerHTML = `<div class="bubble user"></div>
    <div class="user-meta">${nav}<button class="link edit" type="button" title="Edit and fork">Edit</button></div>
    <div class="bubble assistant"></div><div class="status-line"></div>`;
  turn.querySelector(".bubble.user").textContent = node.content;
  fillAnswer(turn, node);
  if (state.editing?.id === node.id) turn.editor = renderEditBox(turn, node);
  turn.querySelector(".edit").addEventListener("click", () => startEdit(node));
  turn.querySelector(".prev")?.addEventListener("click", () => switchBranch(node, siblings[index - 1]));
  turn.querySelector(".next")?.addEventListener("click", () => switchBranch(node, siblings[index + 1]));
  turn.querySelector(".bubble.assistant").addEventListener("click", () => selectMessage(node.id).catch(report));
  return turn;
}

function fillAnswer(turn, node) {
  const bubble = turn.querySelector(".bubble.assistant");
  const status = turn.querySelector(".status-line");
  status.className = `status-line ${node.status}`;
  status.replaceChildren();
  bubble.classList.remove("cursor");
  // Finished text is rendered Markdown (by the server); text still streaming is shown plain.
  const placeholder = (text) => {
    plainInto(bubble, "");
    bubble.innerHTML = `<span class="muted">${text}</span>`;
  };
  if (node.status === "completed") {
    renderInto(bubble, node.response || "");
  } else if (node.status === "running") {
    if (node.text) streamInto(bubble, node);
    else placeholder(escapeHtml(node.step || "Working…"));
    bubble.classList.add("cursor");
    if (node.steps?.size) status.textContent = `Running ${[...node.steps].join(", ")}`; // workflow nodes
    else if (node.step) status.textContent = node.step; // the current step, where people look
  } else if (node.status === "waiting") {
    if (node.text) renderInto(bubble, node.text);
    else placeholder("Paused");
    status.innerHTML = 'Waiting for your approval <button class="link review" type="button">Review</button>';
    status.querySelector(".review").addEventListener("click", () => reviewPermission(node.id).catch(report));
  } else {
    if (node.response) renderInto(bubble, node.response);
    else placeholder("No answer");
    const said = document.createElement("span");
    said.className = "status-text";
    said.textContent = node.status === "failed" ? `Failed${node.error ? `: ${node.error}` : ""}` : "Stopped";
    const again = document.createElement("button");
    again.className = "link retry";
    again.type = "button";
    again.title = "Run this message again";
    again.textContent = "Retry";
    again.addEventListener("click", () => retry(node).catch(report));
    status.append(said, again);
  }
}

function updateTurn(messageId) {
  const node = state.nodes.get(messageId);
  const turn = document.querySelector(`.turn[data-id="${CSS.escape(messageId)}"]`);
  if (node && turn) fillAnswer(turn, node);
}

function switchBranch(node, target) {
  state.choice.set(node.parent_id || "", target);
  renderMessages();
  const path = currentPath();
  selectMessage(path[path.length - 1]).catch(report);
}

// Editing survives re-renders (a run finishing elsewhere refreshes the list): the draft lives in state.
function startEdit(node) {
  state.editing = { id: node.id, draft: node.content };
  renderMessages();
}

function renderEditBox(turn, node) {
  const box = document.createElement("div");
  box.className = "edit-box";
  box.innerHTML = `<textarea rows="3"></textarea><div>
    <button class="ghost cancel" type="button">Cancel</button>
    <button class="primary save" type="button">Send as a new branch</button></div>`;
  const area = box.querySelector("textarea");
  area.value = state.editing.draft;
  area.addEventListener("input", () => (state.editing.draft = area.value));
  turn.querySelector(".bubble.user").replaceWith(box);
  turn.querySelector(".user-meta").hidden = true;
  box.querySelector(".cancel").addEventListener("click", () => {
    state.editing = null;
    renderMessages();
  });
  box.querySelector(".save").addEventListener("click", () => {
    const content = area.value.trim();
    if (!content) return;
    state.editing = null;
    send(content, { parent: node.parent_id }).catch(report);
  });
  return area;
}

// --- selection, timeline and following ---------------------------------------------------------

async function selectMessage(messageId) {
  state.selected = messageId;
  for (const turn of document.querySelectorAll(".turn")) {
    turn.classList.toggle("selected", turn.dataset.id === messageId);
  }
  const node = state.nodes.get(messageId);
  timeline.reset(messageId, node ? `· ${node.content.slice(0, 40)}` : "");
  const { events } = await api(`/messages/${enc(messageId)}/events`);
  if (state.selected !== messageId) return;
  for (const event of events) apply(event, { replay: true });
  const last = events.length ? events[events.length - 1].event_id : 0;
  const message = await api(`/messages/${enc(messageId)}`);
  if (node) Object.assign(node, { status: message.status, response: message.response, error: message.error });
  updateTurn(messageId);
  if (message.status === "running" && state.stream?.messageId !== messageId) follow(messageId, last);
  if (message.status === "waiting") permissions.show(messageId, message.waiting_for);
}

async function reviewPermission(messageId) {
  const message = await api(`/messages/${enc(messageId)}`);
  if (message.status === "waiting") permissions.show(messageId, message.waiting_for);
  else await openConversation(state.conversationId);
}

function follow(messageId, after) {
  closeStream();
  const stream = { messageId, lastId: after, source: null, timer: null, done: false };
  state.stream = stream;
  $("stop").hidden = false;
  connect(stream);
}

function connect(stream) {
  if (stream.done) return;
  const source = new EventSource(streamUrl(stream.messageId, stream.lastId));
  stream.source = source;
  for (const type of EVENT_TYPES) {
    // "error" is also EventSource's own connection-error event (no data): onerror handles that.
    source.addEventListener(type, (e) => typeof e.data === "string" && receive(stream, JSON.parse(e.data)));
  }
  source.onopen = () => setConnection("live");
  source.onerror = () => {
    if (stream.done) return;
    setConnection("reconnecting", "reconnecting…");
    if (source.readyState === EventSource.CLOSED) {
      // The browser gave up (server down, or 204: nothing left). Look before reconnecting.
      source.close();
      stream.timer = setTimeout(() => recheck(stream), 1000);
    }
  };
}

async function recheck(stream) {
  if (stream.done) return;
  try {
    const message = await api(`/messages/${enc(stream.messageId)}`);
    if (message.status === "running") return connect(stream);
    const { events } = await api(`/messages/${enc(stream.messageId)}/events?after=${stream.lastId}`);
    for (const event of events) receive(stream, event);
    finish(stream, message.status === "waiting" ? message.waiting_for : null);
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) return finish(stream);
    setConnection("reconnecting", "reconnecting…"); // server unreachable: keep trying
    stream.timer = setTimeout(() => recheck(stream), 2000);
  }
}

function receive(stream, event) {
  if (stream !== state.stream || stream.done) return;
  if (event.type !== "llm_chunk") {
    if (event.event_id <= stream.lastId) return; // seen before: replayed after a reconnect
    stream.lastId = event.event_id;
  }
  apply(event, { replay: false });
  if (ENDS.has(event.type)) finish(stream);
  else if (event.type === "permission_request") pausedCheck(stream, event);
}

// A permission_request ends the stream only if it is still the latest word.
async function pausedCheck(stream, event) {
  const message = await api(`/messages/${enc(stream.messageId)}`);
  if (message.status === "waiting" && stream.lastId === event.event_id) finish(stream, message.waiting_for);
}

function finish(stream, waiting = null) {
  stream.done = true;
  stream.source?.close();
  clearTimeout(stream.timer);
  if (state.stream === stream) {
    state.stream = null;
    $("stop").hidden = true;
    setConnection("idle");
  }
  if (waiting) permissions.show(stream.messageId, waiting);
  Promise.all([refreshTree(), loadConversations(), artifacts.load(state.conversationId)]).catch(report);
  if (!memories.searching) memories.load().catch((err) => memories.fail(err)); // the run may have saved some
}

function closeStream() {
  const stream = state.stream;
  if (!stream) return;
  stream.done = true;
  stream.source?.close();
  clearTimeout(stream.timer);
  state.stream = null;
  $("stop").hidden = true;
  setConnection("idle");
}

// Apply one event to the message it belongs to (and to the timeline if it is shown).
function apply(event, { replay }) {
  if (event.type !== "llm_chunk") timeline.add(event);
  const node = state.nodes.get(event.message_id);
  if (!node) return;
  const lead = event.data?.invocation === "lead";
  const step = stepOf(event, lead);
  if (step && node.status === "running") {
    const changed = node.step !== step;
    node.step = step;
    if (changed && event.type !== "llm_chunk") updateTurn(event.message_id);
  }
  switch (event.type) {
    case "llm_chunk":
      if (!lead) return;
      node.text = (node.text || "") + (event.data.delta || "");
      break;
    case "agent_start":
      if (lead) node.text = "";
      break;
    case "llm_complete":
      if (lead) node.text = event.data.content || "";
      break;
    case "permission_request":
      node.status = "waiting";
      if (!replay) permissions.show(event.message_id, event.data);
      break;
    case "permission_result":
      node.status = "running";
      permissions.hide(event.message_id);
      break;
    case "artifact_created":
    case "artifact_updated":
      if (!replay) artifacts.load(state.conversationId).catch(report);
      return;
    case "workflow_node_start":
      (node.steps ??= new Set()).add(event.data.execution);
      break;
    case "workflow_node_complete":
      node.steps?.delete(event.data.execution);
      break;
    case "complete":
      Object.assign(node, { status: "completed", response: event.data.response, text: "" });
      break;
    case "error":
      Object.assign(node, { status: "failed", error: event.data.message });
      break;
    case "cancelled":
      Object.assign(node, { status: "cancelled", response: event.data.partial_response || node.text });
      break;
    default:
      return;
  }
  updateTurn(event.message_id);
  if (event.type === "llm_chunk") $("messages").scrollTop = $("messages").scrollHeight;
}

// --- sending -----------------------------------------------------------------------------------

// `parent`: undefined continues the branch shown; a message id or null (new root) forks.
async function send(content, { parent } = {}) {
  const body = { content };
  if (state.conversationId) body.conversation_id = state.conversationId;
  if (parent !== undefined) body.parent_message_id = parent;
  else {
    const path = currentPath();
    if (path.length) body.parent_message_id = path[path.length - 1];
  }
  if ($("assistant").value) body.assistant = $("assistant").value;
  const accepted = await api("/chat", { method: "POST", json: body });
  await started(accepted, content);
}

// A failed or cancelled message runs again as a sibling (same parent and content).
async function retry(node) {
  const accepted = await api(`/messages/${enc(node.id)}/retry`, { method: "POST" });
  await started(accepted, node.content);
}

// A run was accepted (send, edit or retry): show its branch and follow it.
async function started(accepted, content) {
  const fresh = accepted.conversation_id !== state.conversationId;
  state.conversationId = accepted.conversation_id;
  history.replaceState(null, "", `#c=${accepted.conversation_id}`);
  await refreshTree();
  const node = state.nodes.get(accepted.message_id);
  state.choice.set(node?.parent_id || "", accepted.message_id);
  renderMessages();
  timeline.reset(accepted.message_id, `· ${content.slice(0, 40)}`);
  state.selected = accepted.message_id;
  follow(accepted.message_id, 0);
  if (fresh) artifacts.load(accepted.conversation_id).catch(report);
  loadConversations().catch(report);
}

$("composer").addEventListener("submit", (e) => {
  e.preventDefault();
  const input = $("input");
  const content = input.value.trim();
  if (!content) return;
  input.value = "";
  send(content).catch((err) => {
    input.value = content;
    report(err);
    if (err instanceof ApiError && err.status === 429) setConnection("reconnecting", "busy: try again shortly");
  });
});
$("input").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) {
    e.preventDefault();
    $("composer").requestSubmit();
  }
});
$("stop").addEventListener("click", () => {
  if (state.stream) api(`/chat/${enc(state.stream.messageId)}/cancel`, { method: "POST" }).catch(report);
});
$("new-chat").addEventListener("click", newChat);
$("more-conversations").addEventListener("click", () => loadConversations(true).catch(report));

// --- start -------------------------------------------------------------------------------------

// The assistants to answer (GET /assistants): a picker when there is more than the built-in one;
// the empty choice is the agent files as they are.
async function loadAssistants() {
  const { assistants } = await api("/assistants");
  const saved = assistants.filter((a) => !a.built_in);
  const picker = $("assistant");
  picker.replaceChildren(new Option("Default agent", ""));
  for (const a of saved) picker.append(new Option(`${a.name} (v${a.version})`, a.assistant_id));
  picker.hidden = saved.length === 0;
}

async function start() {
  memories.load().catch((err) => memories.fail(err));
  loadAssistants().catch(report);
  try {
    await loadConversations();
    const match = location.hash.match(/c=([^&]+)/);
    if (match) await openConversation(decodeURIComponent(match[1]));
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) newChat();
    else report(err);
  }
}

start();
