// The permission dialog: approve / deny (with a reason) / edit arguments (JSON) / always allow,
// per pending tool call. Shown when a run pauses, and again after a reload while it is paused.

import { api, ApiError, byIds, enc } from "./api.js";
import { escapeHtml } from "./markdown.js";

const ACTIONS = [
  ["approve", "Approve"],
  ["deny", "Deny"],
  ["edit", "Edit arguments"],
  ["always", "Always allow"],
];

export class PermissionDialog {
  constructor({ onResumed, onGone }) {
    Object.assign(this, byIds({
      dialog: "permission-dialog", calls: "permission-calls", error: "permission-error",
      submitButton: "permission-submit",
    }));
    this.onResumed = onResumed;
    this.onGone = onGone;
    this.messageId = null;
    this.waiting = null;
    document.getElementById("permission-form").addEventListener("submit", (e) => {
      e.preventDefault();
      this.submit();
    });
    document.getElementById("permission-later").addEventListener("click", () => this.dialog.close());
  }

  show(messageId, waiting) {
    if (!waiting || !(waiting.calls || []).length) return;
    const same = this.messageId === messageId && this.waiting?.interrupt_id === waiting.interrupt_id;
    this.messageId = messageId;
    this.waiting = waiting;
    if (!same) this.render();
    if (!this.dialog.open) this.dialog.showModal();
  }

  reopen() {
    if (this.waiting && !this.dialog.open) this.dialog.showModal();
  }

  hide(messageId) {
    if (messageId && messageId !== this.messageId) return;
    this.messageId = null;
    this.waiting = null;
    if (this.dialog.open) this.dialog.close();
  }

  render() {
    this.error.textContent = "";
    this.calls.replaceChildren();
    for (const call of this.waiting.calls) {
      const card = document.createElement("div");
      card.className = "call";
      card.dataset.callId = call.tool_call_id;
      const name = `action-${call.tool_call_id}`;
      const choices = ACTIONS.map(
        ([value, label]) =>
          `<label><input type="radio" name="${escapeHtml(name)}" value="${value}"${value === "approve" ? " checked" : ""}> ${label}</label>`,
      ).join("");
      card.innerHTML = `
        <div class="call-head"><strong>${escapeHtml(call.tool)}</strong><span class="muted small">${escapeHtml(call.agent || "")}</span></div>
        <pre>${escapeHtml(JSON.stringify(call.arguments, null, 2))}</pre>
        <div class="choices">${choices}</div>
        <input class="reason" type="text" placeholder="Reason for the agent (optional)" hidden>
        <textarea class="edit-args" spellcheck="false" hidden></textarea>`;
      card.querySelector(".edit-args").value = JSON.stringify(call.arguments, null, 2);
      card.addEventListener("change", () => {
        const action = card.querySelector("input[type=radio]:checked").value;
        card.querySelector(".reason").hidden = action !== "deny";
        card.querySelector(".edit-args").hidden = action !== "edit";
      });
      this.calls.append(card);
    }
  }

  decisions() {
    const decisions = {};
    for (const card of this.calls.querySelectorAll(".call")) {
      const id = card.dataset.callId;
      const action = card.querySelector("input[type=radio]:checked").value;
      const decision = { action };
      if (action === "deny") {
        const reason = card.querySelector(".reason").value.trim();
        if (reason) decision.reason = reason;
      } else if (action === "edit") {
        try {
          decision.arguments = JSON.parse(card.querySelector(".edit-args").value);
        } catch (err) {
          throw new Error(`arguments for ${id} are not valid JSON: ${err.message}`);
        }
        if (typeof decision.arguments !== "object" || Array.isArray(decision.arguments) || !decision.arguments) {
          throw new Error(`arguments for ${id} must be a JSON object`);
        }
      }
      decisions[id] = decision;
    }
    return decisions;
  }

  async submit() {
    this.error.textContent = "";
    let decisions;
    try {
      decisions = this.decisions();
    } catch (err) {
      this.error.textContent = err.message;
      return;
    }
    const messageId = this.messageId;
    this.submitButton.disabled = true;
    try {
      const accepted = await api(`/chat/${enc(messageId)}/resume`, { method: "POST", json: { decisions } });
      const after = Number(new URL(accepted.stream_url, location.origin).searchParams.get("after") || 0);
      this.hide(messageId);
      this.onResumed(messageId, after);
    } catch (err) {
      if (err instanceof ApiError && err.status === 409) {
        this.hide(messageId);
        this.onGone(messageId);
      } else {
        this.error.textContent = err.message; // 422: fix and resubmit; the run stays paused
      }
    } finally {
      this.submitButton.disabled = false;
    }
  }
}
