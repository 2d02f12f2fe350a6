// Progress where people look: the answer's bubble shows what the run is doing now (a tool, a
// subagent, an approval, the answer being written), and streamed text is shown as Markdown
// (rendered by the server, at most every STREAM_RENDER_MS) with its line breaks.

import { renderInto } from "./markdown.js";

// Streamed text as Markdown, rendered at most every STREAM_RENDER_MS (the server renders it):
// in between, the last rendering stays up and a timer brings the newest text in.
const STREAM_RENDER_MS = 350;
export function streamInto(bubble, node) {
  const now = performance.now();
  if (bubble.shown === node.text) return;
  if (!bubble.renderedAt || now - bubble.renderedAt >= STREAM_RENDER_MS) {
    bubble.renderedAt = now;
    bubble.shown = node.text;
    renderInto(bubble, node.text);
  } else if (!bubble.renderTimer) {
    bubble.renderTimer = setTimeout(() => {
      bubble.renderTimer = null;
      if (node.status === "running" && node.text) streamInto(bubble, node);
    }, STREAM_RENDER_MS);
  }
}

// What the run is doing now, for the answer's bubble (tool, subagent, approval, writing).
export function stepOf(event, lead) {
  const data = event.data || {};
  switch (event.type) {
    case "agent_start":
      return lead ? "Thinking…" : `Subagent ${event.agent || ""} is working…`;
    case "tool_start":
      return `${lead ? "" : `${event.agent || "Subagent"}: `}running ${data.tool}…`;
    case "subagent_start":
      return `Asking ${event.agent || "a subagent"}: ${String(data.instruction || "").slice(0, 80)}`;
    case "subagent_complete":
    case "tool_complete":
      return lead ? "Thinking…" : `Subagent ${event.agent || ""} is working…`;
    case "permission_result":
      return "Approved calls are running…";
    case "llm_chunk":
      return lead ? "Writing the answer…" : null;
    default:
      return null;
  }
}

