// The live timeline of one message: agents, model calls, tool calls, pauses, artifacts.

import { escapeHtml } from "./markdown.js";

function short(value, limit = 80) {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text && text.length > limit ? `${text.slice(0, limit - 1)}…` : text || "";
}

function seconds(ms) {
  return ms >= 1000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms)} ms`;
}

// [tag, css class, html] for an event, or null for events the timeline does not show.
function describe(event) {
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
      return ["model", "", `${agent} · ${tokens} tokens${calls ? ` · ${calls} tool call${calls > 1 ? "s" : ""}` : ""}`];
    }
    case "tool_start":
      return ["tool", "tool", `${escapeHtml(d.tool)}${d.edited ? " (edited)" : ""} <span class="args">${escapeHtml(short(d.arguments))}</span>`];
    case "tool_complete":
      return d.success
        ? ["done", "ok", `${escapeHtml(d.tool)} <span class="muted">${seconds(d.duration_ms || 0)}</span>`]
        : ["failed", "bad", `${escapeHtml(d.tool)}${d.denied ? " denied" : ""}: ${escapeHtml(short(d.result?.error || "", 120))}`];
    case "permission_request":
      return ["paused", "wait", `waiting for approval: ${escapeHtml((d.calls || []).map((c) => c.tool).join(", "))}`];
    case "permission_result":
      return ["answer", "wait", escapeHtml((d.decisions || []).map((x) => `${x.tool}: ${x.action}`).join(", "))];
    case "subagent_start":
      return ["subagent", "agent", `${agent}: ${escapeHtml(short(d.instruction || ""))}`];
    case "subagent_complete":
      return ["subagent", d.status === "failed" ? "bad" : "ok", `${agent} ${escapeHtml(d.status || "done")}`];
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
      return ["complete", "ok", `${m.wall_ms ? seconds(m.wall_ms) : ""}${tokens != null ? ` · ${tokens} tokens` : ""}`];
    }
    case "error":
      return ["error", "bad", escapeHtml(d.message || "failed")];
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
    this.tools = new Map();
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
    const described = describe(event);
    if (!described) return;
    const [tag, cls, html] = described;
    const key = event.data?.tool_call_id;
    let item = event.type === "tool_complete" && key ? this.tools.get(key) : null;
    if (!item) {
      item = document.createElement("li");
      this.list.append(item);
      if (event.type === "tool_start" && key) this.tools.set(key, item);
    }
    item.dataset.type = event.type;
    item.innerHTML = `<span class="tag ${cls}">${tag}</span><span class="text">${html}</span>`;
    item.scrollIntoView({ block: "nearest" });
  }
}
