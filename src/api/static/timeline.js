// The live timeline of one message: every step with what it carried: agents, model calls,
// tool calls with their arguments and results, subagent tasks and answers, approvals and what
// was decided, compactions, errors. Long values are collapsed (<details>): one click shows all.

import { escapeHtml } from "./markdown.js";

const INLINE = 100; // values up to this long (one line) are shown as they are

function short(value, limit = 80) {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text && text.length > limit ? `${text.slice(0, limit - 1)}…` : text || "";
}

// A labelled value: inline when short, else a one-line preview that opens to the full text.
function field(label, value, cls = "") {
  if (value === undefined || value === null || value === "") return "";
  const compact = typeof value === "string" ? value : JSON.stringify(value);
  const name = `<span class="label">${escapeHtml(label)}</span>`;
  if (compact.length <= INLINE && !compact.includes("\n")) {
    return `<div class="field ${cls}">${name} <code>${escapeHtml(compact)}</code></div>`;
  }
  const full = typeof value === "string" ? value : JSON.stringify(value, null, 2);
  const preview = escapeHtml(short(compact.replace(/\s+/g, " "), 70));
  return `<details class="field ${cls}"><summary>${name} <code>${preview}</code></summary><pre>${escapeHtml(full)}</pre></details>`;
}

function toolResult(d) {
  const result = d.result || {};
  if (result.success === false || d.success === false) return field("error", result.error || "failed", "bad");
  return field("result", result.data);
}

function seconds(ms) {
  return ms >= 1000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms)} ms`;
}

// [tag, css class, html] for an event, or null for events the timeline does not show.
// `argumentsOf(tool_call_id)`: the arguments its tool_start carried (a result line keeps them).
function describe(event, argumentsOf) {
  const d = event.data || {};
  const agent = escapeHtml(event.agent || "");
  switch (event.type) {
    case "metadata":
      return d.recovered ? ["run", "", "recovered after a restart"] : ["run", "", "started"];
    case "agent_start":
      return ["agent", "agent", `${agent} <span class="muted">round ${d.round ?? 1}</span>`];
    case "llm_complete": {
      const usage = d.usage || {};
      const known = usage.prompt_tokens != null || usage.completion_tokens != null;
      const tokens = known ? (usage.prompt_tokens || 0) + (usage.completion_tokens || 0) : "n/a";
      const calls = (d.tool_calls || []).length;
      const head = `${agent} · ${tokens} tokens${calls ? ` · ${calls} tool call${calls > 1 ? "s" : ""}` : ""}`;
      return ["model", "", head + (calls ? field("said", d.content) : "")];
    }
    case "tool_start":
      return ["tool", "tool", `${escapeHtml(d.tool)}${d.edited ? " (edited)" : ""} <span class="muted">running</span>${field("arguments", d.arguments)}`];
    case "tool_complete": {
      const args = argumentsOf(d.tool_call_id);
      const how = d.denied ? "denied" : d.refused ? "refused" : d.outcome && d.outcome !== "completed" && d.outcome !== "failed" ? d.outcome.replaceAll("_", " ") : "";
      const head = `${escapeHtml(d.tool)} <span class="muted">${escapeHtml(how)} ${seconds(d.duration_ms || 0)}</span>`;
      return [d.success ? "done" : "failed", d.success ? "ok" : "bad", head + field("arguments", args) + toolResult(d)];
    }
    case "permission_request":
      return ["paused", "wait", `waiting for approval${(d.calls || []).map((c) => `<div class="call-line">${escapeHtml(c.tool)}${field("arguments", c.arguments)}</div>`).join("")}`];
    case "permission_result":
      return ["decided", "wait", (d.decisions || []).map((x) => `<div class="call-line"><b>${escapeHtml(x.tool)}</b>: ${escapeHtml(x.action)}${field("reason", x.reason)}${x.action === "edit" ? field("new arguments", x.arguments) : ""}</div>`).join("")];
    case "subagent_start":
      return ["subagent", "agent", `${agent} <span class="muted">started</span>${field("task", d.instruction)}`];
    case "subagent_complete":
      return ["subagent", d.status === "failed" ? "bad" : "ok", `${agent} <span class="muted">${escapeHtml(d.status || "done")}</span>${field("answer", d.result)}${field("error", d.error, "bad")}`];
    case "context_compacted": {
      const what = d.scope === "history" ? `${d.messages_summarized ?? "earlier"} messages` : `${d.rounds_summarized || 0} tool rounds`;
      const cut = d.results_shortened ? `, ${escapeHtml(d.results_shortened)} results shortened` : "";
      return ["compact", "", `${agent} · ${escapeHtml(what)} summarised: ${escapeHtml(d.tokens_before)} → ${escapeHtml(d.tokens_after)} tokens${cut}${d.aggressive ? " (after 'too long')" : ""}`];
    }
    case "memory_recalled": {
      const items = d.items || [];
      const count = (d.ids || []).length;
      const chunks = (d.knowledge_ids || []).length;
      const what = chunks ? `${count - chunks} memories, ${chunks} passages` : `${count} memor${count === 1 ? "y" : "ies"}`;
      const head = `${agent} · ${what} <span class="muted">${escapeHtml(d.profile)} · ${escapeHtml(d.mode)} · ${escapeHtml(d.tokens)}${d.budget ? `/${escapeHtml(d.budget)}` : ""} tokens</span>`;
      const list = items.map((x) => `<li>${escapeHtml(short(x.text, 120))}</li>`).join("");
      return ["recall", "doc", head + (list ? `<ul class="recalled small">${list}</ul>` : "")];
    }
    case "artifact_created":
    case "artifact_updated":
      return ["artifact", "doc", `${escapeHtml(d.title || d.artifact_id)} <span class="muted">v${d.version}</span>`];
    case "workflow_node_start":
      return ["node", "agent", `${escapeHtml(d.execution)} <span class="muted">${escapeHtml(d.role)}</span>`];
    case "workflow_node_complete":
      return [d.status, d.status === "ok" ? "ok" : "bad", `${escapeHtml(d.execution)} <span class="muted">${escapeHtml(short(d.error || d.output_summary || ""))}</span>`];
    case "handoff":
      return ["handoff", "agent", `${escapeHtml(d.from_agent)} → ${escapeHtml(d.to_agent)} <span class="muted">${escapeHtml(short(d.message || ""))}</span>`];
    case "complete": {
      const m = d.metrics || {};
      const tokens = m.tokens && m.llm_calls ? (m.tokens.total ?? "n/a") : null;
      const early = d.outcome && d.outcome !== "completed" ? `${escapeHtml(d.outcome.replaceAll("_", " "))}${field("reason", d.reason)}` : "";
      return ["complete", early ? "wait" : "ok", `${m.wall_ms ? seconds(m.wall_ms) : ""}${tokens != null ? ` · ${tokens} tokens` : ""} ${early}`];
    }
    case "error":
      return ["error", "bad", `${escapeHtml(d.message || "failed")}${d.kind ? ` <span class="muted">${escapeHtml(d.kind)}</span>` : ""}`];
    case "cancelled":
      return ["stopped", "bad", escapeHtml(d.reason || "cancelled")];
    default:
      return null;
  }
}

export class Timeline {
  constructor(list, subject) {
    this.list = list;
    this.subject = subject;
    this.messageId = null;
    this.last = 0;
    this.tools = new Map(); // tool_call_id -> {item, arguments}: a result fills its call's line
  }

  reset(messageId, label = "") {
    this.messageId = messageId;
    this.last = 0;
    this.tools.clear();
    this.list.replaceChildren();
    this.subject.textContent = label;
  }

  add(event) {
    if (event.message_id !== this.messageId || event.event_id <= this.last) return;
    this.last = event.event_id; // replayed and live events overlap: show each once
    const described = describe(event, (id) => this.tools.get(id)?.arguments);
    if (!described) return;
    const [tag, cls, html] = described;
    const key = event.data?.tool_call_id;
    let item = event.type === "tool_complete" && key ? this.tools.get(key)?.item : null;
    if (!item) {
      item = document.createElement("li");
      this.list.append(item);
      if (event.type === "tool_start" && key) this.tools.set(key, { item, arguments: event.data.arguments });
    }
    item.dataset.type = event.type;
    item.innerHTML = `<span class="tag ${cls}">${tag}</span><div class="text">${html}</div>`;
    // Follow the newest step inside the timeline's own box only: scrolling the page (a phone's
    // one column) would carry the person away from where they are reading.
    const box = this.list.closest(".panel");
    if (box && box.scrollHeight > box.clientHeight && getComputedStyle(box).overflowY !== "visible") {
      box.scrollTop = box.scrollHeight;
    }
  }
}
