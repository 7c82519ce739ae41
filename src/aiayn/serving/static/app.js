// The page: translate as you type (debounced), then draw the attention of the hypothesis the search returned.
// Plain script, no dependencies. Data: POST /v1/translate with return_attention; each sentence carries
// attention.{encoder,decoder,cross}[layer][head][query][key] and its token labels.
"use strict";

const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";
const ROW = 22, WIDTH = 360, LEFT = 150, RIGHT = 210, TOP = 22;
const KIND_TITLES = {
  cross: "encoder-decoder attention: each output token (left) over the source (right)",
  encoder: "encoder self-attention: each source token (left) over the source (right)",
  decoder: "decoder masked self-attention: each decoder input (left) over the earlier ones (right)",
};
const state = { models: [], sentences: [], sentence: 0, kind: "cross", layer: -1, head: "avg", focus: null };
let timer = null, inflight = null, sequence = 0;

function el(name, attrs, parent) {
  const node = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  if (parent) parent.appendChild(node);
  return node;
}

function setStatus(text, isError) {
  const status = $("status");
  status.textContent = text;
  status.classList.toggle("error", !!isError);
}

async function loadModels() {
  const response = await fetch("/v1/info");
  const info = await response.json();
  state.models = info.models;
  const select = $("model");
  select.innerHTML = "";
  for (const m of info.models) {
    const option = document.createElement("option");
    option.value = `${m.source}-${m.target}`;
    option.textContent = `${m.source} → ${m.target}`;
    select.appendChild(option);
  }
}

function schedule() {
  clearTimeout(timer);
  timer = setTimeout(translate, 350);
}

async function translate(withAttention = true) {
  const text = $("source").value;
  if (inflight) inflight.abort();
  if (!text.trim()) {
    $("output").textContent = "";
    state.sentences = [];
    render();
    setStatus("");
    return;
  }
  const [source, target] = $("model").value.split("-");
  const body = { texts: [text], source, target, return_attention: withAttention };
  const beam = parseInt($("beam").value, 10);
  if (beam > 0) body.beam = beam;
  const mine = ++sequence;
  inflight = new AbortController();
  setStatus("translating…");
  const started = performance.now();
  let response, data;
  try {
    response = await fetch("/v1/translate", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
      signal: inflight.signal,
    });
    data = await response.json();
  } catch (error) {
    if (error.name !== "AbortError") setStatus("the server did not answer", true);
    return;
  }
  if (mine !== sequence) return; // a newer request is on its way
  if (!response.ok) {
    if (data.limit === "max_attention_sentences" && withAttention) return translate(false);
    setStatus(data.error || `error ${response.status}`, true);
    return;
  }
  const result = data.translations[0];
  $("output").textContent = result.text;
  state.sentences = result.sentences.filter((s) => s.attention);
  state.sentence = Math.min(state.sentence, Math.max(0, state.sentences.length - 1));
  state.focus = null;
  setStatus(`${Math.round(performance.now() - started)} ms` + (withAttention ? "" : " (too long to show attention)"));
  fillSelectors();
  render();
}

function fillSelectors() {
  const s = state.sentences[state.sentence];
  const sentence = $("sentence");
  sentence.innerHTML = "";
  state.sentences.forEach((item, i) => {
    const option = document.createElement("option");
    option.value = i;
    option.textContent = `${i + 1}: ${item.source.slice(0, 40)}`;
    sentence.appendChild(option);
  });
  sentence.value = state.sentence;
  sentence.parentElement.hidden = state.sentences.length < 2;
  if (!s) return;
  const layers = s.attention[state.kind].length, heads = s.attention[state.kind][0].length;
  if (state.layer < 0 || state.layer >= layers) state.layer = layers - 1; // the last layer first
  if (state.head !== "avg") state.head = Math.min(state.head, heads - 1);
  const layer = $("layer");
  layer.innerHTML = "";
  for (let i = 0; i < layers; i++) layer.add(new Option(String(i + 1), String(i)));
  layer.value = String(state.layer);
  const head = $("head");
  head.innerHTML = "";
  head.add(new Option("average", "avg"));
  for (let i = 0; i < heads; i++) head.add(new Option(String(i + 1), String(i)));
  head.value = String(state.head);
}

function labels(s) {
  const a = s.attention;
  if (state.kind === "cross") return [a.target, a.source];
  if (state.kind === "encoder") return [a.source, a.source];
  return [a.target_in, a.target_in];
}

function matrix(s) {
  const perHead = s.attention[state.kind][state.layer]; // [h][Tq][Tk]
  if (state.head !== "avg") return perHead[state.head];
  return perHead[0].map((row, i) => row.map((_, j) => perHead.reduce((sum, h) => sum + h[i][j], 0) / perHead.length));
}

function shown(piece) {
  return piece.length > 18 ? piece.slice(0, 17) + "…" : piece;
}

function render() {
  const section = $("attention"), svg = $("view");
  const s = state.sentences[state.sentence];
  section.hidden = !s;
  svg.innerHTML = "";
  if (!s) return;
  const [queries, keys] = labels(s);
  const w = matrix(s);
  const headText = state.head === "avg" ? "heads averaged" : `head ${state.head + 1}`;
  $("caption").textContent = `${KIND_TITLES[state.kind]}; layer ${state.layer + 1}, ${headText}`;
  const rows = Math.max(queries.length, keys.length);
  svg.setAttribute("viewBox", `0 0 ${WIDTH} ${TOP + rows * ROW + 4}`);
  el("text", { x: LEFT, y: 14, "text-anchor": "end", class: "colhead" }, svg).textContent =
    state.kind === "cross" ? "output" : state.kind === "encoder" ? "source" : "decoder input";
  el("text", { x: RIGHT, y: 14, class: "colhead" }, svg).textContent =
    state.kind === "decoder" ? "decoder input" : "source";
  const y = (i) => TOP + i * ROW + ROW / 2;
  const links = el("g", {}, svg);
  const focus = state.focus;
  for (let i = 0; i < queries.length; i++) {
    let best = 0;
    for (let j = 1; j < keys.length; j++) if (w[i][j] > w[i][best]) best = j;
    for (let j = 0; j < keys.length; j++) {
      const inFocus = focus && ((focus.side === "query" && focus.index === i) || (focus.side === "key" && focus.index === j));
      const argmax = j === best;
      if (focus ? !inFocus || w[i][j] < 0.01 : !(argmax || ($("all-links").checked && w[i][j] >= 0.02))) continue;
      el("line", {
        x1: LEFT + 4, y1: y(i), x2: RIGHT - 4, y2: y(j),
        class: argmax ? "link argmax" : "link",
        "stroke-width": argmax ? 2 : 1.5,
        "stroke-opacity": focus || !argmax ? Math.max(0.08, w[i][j]).toFixed(3) : 0.75,
      }, links);
    }
  }
  const weightOf = (side, index) => {
    if (!focus || focus.side === side) return 0;
    return side === "key" ? w[focus.index][index] : w[index][focus.index];
  };
  const column = (items, side) => {
    const values = items.map((_, i) => weightOf(side, i));
    const top = Math.max(1e-9, ...values);
    items.forEach((piece, i) => {
      const g = el("g", { class: `tok ${side}`, "data-i": i, "data-weight": values[i].toFixed(3), tabindex: 0 }, svg);
      if (focus && focus.side === side && focus.index === i) g.classList.add("focus");
      const x = side === "query" ? 2 : RIGHT - 2;
      el("rect", { x, y: TOP + i * ROW + 2, width: LEFT - 2, height: ROW - 4, rx: 3,
        "fill-opacity": (values[i] / top * 0.85).toFixed(3) }, g);
      const text = el("text", { x: side === "query" ? LEFT - 4 : RIGHT + 4, y: y(i) + 4,
        "text-anchor": side === "query" ? "end" : "start" }, g);
      text.textContent = shown(piece);
      const title = el("title", {}, g);
      title.textContent = `${piece}` + (focus && focus.side !== side ? `: ${values[i].toFixed(3)}` : "");
      const enter = () => {
        if (state.focus && state.focus.side === side && state.focus.index === i) return;
        state.focus = { side, index: i };
        render();
      };
      g.addEventListener("mouseenter", enter);
      g.addEventListener("focus", enter);
      g.addEventListener("click", enter);
    });
  };
  column(queries, "query");
  column(keys, "key");
}

function bind() {
  $("source").addEventListener("input", schedule);
  $("model").addEventListener("change", () => translate());
  $("beam").addEventListener("change", () => translate());
  $("sentence").addEventListener("change", (e) => { state.sentence = +e.target.value; state.focus = null; fillSelectors(); render(); });
  $("layer").addEventListener("change", (e) => { state.layer = +e.target.value; render(); });
  $("head").addEventListener("change", (e) => { state.head = e.target.value === "avg" ? "avg" : +e.target.value; render(); });
  $("all-links").addEventListener("change", render);
  for (const radio of document.querySelectorAll("input[name=kind]")) {
    radio.addEventListener("change", (e) => { state.kind = e.target.value; state.focus = null; fillSelectors(); render(); });
  }
  $("view").addEventListener("mouseleave", () => { state.focus = null; render(); });
}

bind();
loadModels().then(() => { if ($("source").value.trim()) translate(); });
