// The HTTP API client: JSON in and out, bearer token from localStorage, typed errors.

export const API = "/api/v1";
const TOKEN_KEY = "artifactflow.token";

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

let unauthorized = () => {};

export function onUnauthorized(handler) {
  unauthorized = handler;
}

export function getToken() {
  return localStorage.getItem(TOKEN_KEY) || "";
}

export function setToken(token) {
  if (token) localStorage.setItem(TOKEN_KEY, token);
  else localStorage.removeItem(TOKEN_KEY);
}

export async function api(path, { method = "GET", json, raw = false } = {}) {
  const headers = {};
  const token = getToken();
  if (token) headers.Authorization = `Bearer ${token}`;
  let body;
  if (json !== undefined) {
    headers["Content-Type"] = "application/json";
    body = JSON.stringify(json);
  }
  const response = await fetch(API + path, { method, headers, body });
  if (!response.ok) {
    let code = "http_error";
    let message = response.statusText;
    try {
      const data = await response.json();
      code = data.error.code;
      message = data.error.message;
    } catch {
      // not our JSON error body (a proxy, a dropped connection): keep the status text
    }
    if (response.status === 401) unauthorized(message);
    throw new ApiError(response.status, code, message);
  }
  if (raw) return response;
  if (response.status === 204) return null;
  return response.json();
}

// EventSource cannot send headers: the token goes in the query string.
export function streamUrl(messageId, after) {
  const params = new URLSearchParams({ after: String(after) });
  const token = getToken();
  if (token) params.set("access_token", token);
  return `${API}/stream/${encodeURIComponent(messageId)}?${params}`;
}

export const enc = encodeURIComponent;

// A component's elements, looked up once: {name: "element-id"} → {name: element}.
export function byIds(ids) {
  return Object.fromEntries(Object.entries(ids).map(([name, id]) => [name, document.getElementById(id)]));
}
