// The artifact panel: list, content at any version, a diff between versions, Markdown export.

import { api, byIds, enc } from "./api.js";
import { escapeHtml, plainInto, renderInto } from "./markdown.js";

export class ArtifactPanel {
  constructor() {
    Object.assign(this, byIds({
      list: "artifacts", view: "artifact-view", title: "artifact-title",
      version: "artifact-version", diffFrom: "artifact-diff-from", content: "artifact-content",
    }));
    this.conversationId = null;
    this.current = null;
    this.version.addEventListener("change", () => this.renderContent());
    this.diffFrom.addEventListener("change", () => this.renderContent());
    document.getElementById("artifact-export").addEventListener("click", () => this.export());
  }

  base() {
    return `/conversations/${enc(this.conversationId)}/artifacts`;
  }

  async load(conversationId) {
    if (conversationId !== this.conversationId) this.current = null;
    this.conversationId = conversationId;
    if (!conversationId) return this.renderList([]);
    const { artifacts } = await api(this.base());
    if (conversationId !== this.conversationId) return;
    this.renderList(artifacts);
    if (!artifacts.length) return;
    const latest = [...artifacts].sort((a, b) => b.updated_at - a.updated_at)[0];
    const keep = artifacts.find((a) => a.artifact_id === this.current);
    await this.select(keep ? keep.artifact_id : latest.artifact_id);
  }

  renderList(artifacts) {
    this.list.replaceChildren();
    this.view.hidden = !artifacts.length;
    if (!artifacts.length) {
      this.list.innerHTML = '<li class="muted small">None yet</li>';
      return;
    }
    for (const artifact of artifacts) {
      const item = document.createElement("li");
      item.className = "item";
      item.dataset.id = artifact.artifact_id;
      item.innerHTML = `<span>${escapeHtml(artifact.title)}</span><span class="muted small">v${artifact.version}</span>`;
      item.addEventListener("click", () => this.select(artifact.artifact_id));
      this.list.append(item);
    }
  }

  async select(artifactId) {
    // Reloads (on every artifact event and on completion) must not reset a diff the user chose,
    // even one chosen while this reload was waiting for the versions: read it after the wait.
    const same = artifactId === this.current;
    this.current = artifactId;
    for (const item of this.list.querySelectorAll("li.item")) {
      item.classList.toggle("current", item.dataset.id === artifactId);
    }
    const { versions } = await api(`${this.base()}/${enc(artifactId)}/versions`);
    const keepDiff = same && artifactId === this.current ? this.diffFrom.value : "";
    const latest = versions.length ? versions[versions.length - 1].version : 1;
    this.version.innerHTML = versions
      .map((v) => `<option value="${v.version}">v${v.version} · ${escapeHtml(v.change || "")}</option>`)
      .join("");
    this.version.value = String(latest);
    this.diffFrom.innerHTML =
      '<option value="">—</option>' + versions.map((v) => `<option value="${v.version}">v${v.version}</option>`).join("");
    if (keepDiff && versions.some((v) => String(v.version) === keepDiff)) this.diffFrom.value = keepDiff;
    this.view.hidden = false;
    await this.renderContent();
  }

  async renderContent() {
    if (!this.current) return;
    // Only the latest render may write: an older, slower response must not overwrite it.
    const seq = (this.renderSeq = (this.renderSeq || 0) + 1);
    const url = `${this.base()}/${enc(this.current)}`;
    const version = this.version.value;
    const from = this.diffFrom.value;
    if (from) {
      const { diff } = await api(`${url}/diff?from=${from}&to=${version}`);
      if (seq !== this.renderSeq) return;
      this.title.textContent = `${this.current}: v${from} → v${version}`;
      plainInto(this.content, "");
      this.content.className = "artifact-content diff";
      const lines = diff.split("\n").filter((line, i, all) => line || i < all.length - 1);
      this.content.innerHTML =
        lines
          .map((line) => {
            const cls = /^(@@|\+\+\+ |--- )/.test(line)
              ? "diff-hunk"
              : line.startsWith("+")
                ? "diff-add"
                : line.startsWith("-")
                  ? "diff-del"
                  : "diff-ctx";
            return `<span class="${cls}">${escapeHtml(line) || " "}</span>`;
          })
          .join("") || '<span class="muted">No changes</span>';
    } else {
      const artifact = await api(`${url}?version=${version}`);
      if (seq !== this.renderSeq) return;
      this.title.textContent = `${artifact.title} (v${artifact.version} of ${artifact.current_version})`;
      const markdown = !artifact.content_type || artifact.content_type.includes("markdown");
      this.content.className = `artifact-content ${markdown ? "" : "plain"}`;
      if (markdown) await renderInto(this.content, artifact.content);
      else plainInto(this.content, artifact.content);
    }
  }

  async export() {
    if (!this.current) return;
    const response = await api(`${this.base()}/${enc(this.current)}/export?version=${this.version.value}`, { raw: true });
    const link = document.createElement("a");
    link.href = URL.createObjectURL(await response.blob());
    link.download = `${this.current}.md`;
    link.click();
    setTimeout(() => URL.revokeObjectURL(link.href), 1000);
  }
}
