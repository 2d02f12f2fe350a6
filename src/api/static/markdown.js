// Markdown is rendered by the server (POST /render: markdown-it-py, pygments, nh3 sanitising);
// this module only asks for it, caches the answers, and escapes the page's own text.

import { api } from "./api.js";

export function escapeHtml(text) {
  return String(text)
    .replaceAll("&", "&amp;")
    .replaceAll("<", "&lt;")
    .replaceAll(">", "&gt;")
    .replaceAll('"', "&quot;");
}

const pending = new Map(); // text -> Promise<html>
const rendered = new Map(); // text -> html, for a synchronous re-render (no flicker)
const CACHE_SIZE = 200;

function remember(map, key, value) {
  map.set(key, value);
  if (map.size > CACHE_SIZE) map.delete(map.keys().next().value);
}

export function renderMarkdown(text) {
  const key = String(text || "");
  if (rendered.has(key)) return Promise.resolve(rendered.get(key));
  let html = pending.get(key);
  if (!html) {
    html = api("/render", { method: "POST", json: { text: key } }).then((r) => {
      remember(rendered, key, r.html);
      return r.html;
    });
    html.finally(() => pending.delete(key)).catch(() => {});
    pending.set(key, html);
  }
  return html;
}

// Show `text` in `element` as plain text at once, then as rendered Markdown when it arrives,
// unless the element was given other content meanwhile (a newer render or a live delta).
export function renderInto(element, text) {
  const token = Symbol("render");
  element.renderToken = token;
  element.classList.add("md");
  const key = String(text || "");
  if (rendered.has(key)) {
    element.innerHTML = rendered.get(key);
    return Promise.resolve();
  }
  element.textContent = key;
  return renderMarkdown(text)
    .then((html) => {
      if (element.renderToken === token) element.innerHTML = html;
    })
    .catch((err) => {
      if (element.renderToken === token) element.textContent = text;
      console.warn("markdown rendering failed", err);
    });
}

// Live text (deltas): plain, and cancels a pending render of older text.
export function plainInto(element, text) {
  element.renderToken = null;
  element.classList.remove("md");
  element.textContent = text;
}
