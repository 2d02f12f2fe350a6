// The memory panel: the user's long-term memories (the /api/v1/memories routes): newest first,
// a search (with the mode that actually ran), and a delete button on each. What recall put
// before a message's model call shows in that message's timeline (`memory_recalled`).

import { api, byIds, enc } from "./api.js";
import { escapeHtml } from "./markdown.js";

function itemsOf(body) {
  if (Array.isArray(body)) return body;
  return body?.items || body?.memories || body?.hits || [];
}

function scopeOf(namespace) {
  const parts = Array.isArray(namespace) ? namespace : String(namespace || "").split(".");
  const [, kind, name] = parts;
  if (kind === "project") return `project ${name}`;
  if (kind === "conversation") return "conversation";
  if (kind === "knowledge") return `knowledge ${name}`;
  return kind || "memory";
}

export class MemoryPanel {
  constructor() {
    Object.assign(this, byIds({
      form: "memory-search", query: "memory-query", mode: "memory-mode", list: "memories",
      note: "memory-note", clear: "memory-clear",
    }));
    this.searching = "";
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.search(this.query.value.trim()).catch((err) => this.fail(err));
    });
    this.clear.addEventListener("click", () => {
      this.query.value = "";
      this.load().catch((err) => this.fail(err));
    });
  }

  fail(err) {
    this.note.textContent = err.message || String(err);
    this.note.classList.add("error");
  }

  async load() {
    this.searching = "";
    const body = await api("/memories?limit=50");
    this.render(itemsOf(body), body?.total != null ? `${body.total} in all` : "");
  }

  async search(query) {
    if (!query) return this.load();
    this.searching = query;
    const params = new URLSearchParams({ q: query, mode: this.mode.value, limit: "20" });
    const body = await api(`/memories/search?${params}`);
    if (this.searching !== query) return; // a newer search or a reload answered first
    this.render(itemsOf(body), `search ran as ${body?.mode || this.mode.value}`);
  }

  render(items, note = "") {
    this.note.textContent = note;
    this.note.classList.remove("error");
    this.clear.hidden = !this.searching;
    this.list.replaceChildren();
    if (!items.length) {
      this.list.innerHTML = `<li class="muted small">${this.searching ? "Nothing found" : "No memories yet"}</li>`;
      return;
    }
    for (const memory of items) {
      const item = document.createElement("li");
      item.className = "memory";
      item.dataset.id = memory.id;
      const score = typeof memory.score === "number" && this.searching ? ` · ${memory.score.toFixed(2)}` : "";
      item.innerHTML = `<div class="memory-text">${escapeHtml(memory.text)}</div>`
        + `<div class="memory-meta muted small">${escapeHtml(scopeOf(memory.namespace))}${score}`
        + `<button class="ghost small forget" type="button" title="Forget this memory">Forget</button></div>`;
      item.querySelector(".forget").addEventListener("click", () => this.forget(memory.id).catch((err) => this.fail(err)));
      this.list.append(item);
    }
  }

  async forget(id) {
    await api(`/memories/${enc(id)}`, { method: "DELETE" });
    this.list.querySelector(`li[data-id="${CSS.escape(id)}"]`)?.remove();
    if (!this.list.children.length) this.render([], this.note.textContent);
  }
}
