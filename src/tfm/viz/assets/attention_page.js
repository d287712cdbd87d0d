// The attention page's code (tfm attention, src/tfm/viz): reads the page's JSON (the script
// element #tfm-data; docs/ATTENTION.md, "The page's data") and draws the head view, the model view
// and the large view of one head. Plain JavaScript and SVG: no library, no build step, no network.
'use strict';
(() => {
  const SVG_NS = 'http://www.w3.org/2000/svg';
  const data = JSON.parse(document.getElementById('tfm-data').textContent);
  const $ = (id) => document.getElementById(id);

  // What is shown: the view, the kind of attention (an index into data.kinds), the layer, the
  // heads switched off (kept across kinds and layers), and the hovered token
  // ({side: 'query'|'key', index}) or null.
  const state = { view: 'head', kind: 0, layer: 0, off: new Set(), hover: null };
  const kind = () => data.kinds[state.kind];
  const colour = (head) => data.colors[head % data.colors.length];
  const enabledHeads = () => [...Array(kind().heads).keys()].filter((h) => !state.off.has(h));
  // The keys query q may see: all of them, or 0..q in a causal kind (decoder self-attention).
  const visibleKeys = (k, q) => (k.causal ? Math.min(q + 1, k.keys.length) : k.keys.length);

  function svgElement(name, attributes = {}, parent = null) {
    const element = document.createElementNS(SVG_NS, name);
    for (const [key, value] of Object.entries(attributes)) element.setAttribute(key, value);
    if (parent) parent.appendChild(element);
    return element;
  }

  function htmlElement(name, attributes = {}, text = null, parent = null) {
    const element = document.createElement(name);
    for (const [key, value] of Object.entries(attributes)) element.setAttribute(key, value);
    if (text !== null) element.textContent = text;
    if (parent) parent.appendChild(element);
    return element;
  }

  // Text widths for the layout, measured on a canvas in the SVG's own font (the SVG may be hidden,
  // where getBBox() measures nothing).
  const measure = document.createElement('canvas').getContext('2d');
  function textWidth(text, element) {
    const style = getComputedStyle(element);
    measure.font = `${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
    return measure.measureText(text).width;
  }

  // "#rrggbb" mixed with white: weight 0 is white, 1 the head's colour.
  function shade(hex, weight) {
    const w = Math.max(0, Math.min(1, weight));
    const channel = (i) => Math.round(255 + (parseInt(hex.slice(i, i + 2), 16) - 255) * w);
    return [channel(1), channel(3), channel(5)];
  }

  // ---- the header, the tabs and the selectors ----

  function fillHeader() {
    const list = $('sentences');
    const add = (term, text) => {
      htmlElement('dt', {}, term, list);
      htmlElement('dd', {}, text, list);
    };
    if (data.source) add('source', data.source);
    if (data.target) add('target', data.target);
    add('tokens', data.merged_words ? 'words (subword pieces merged)' : 'subword pieces');
  }

  function showView(view) {
    state.view = view;
    for (const tab of document.querySelectorAll('.tab')) {
      tab.setAttribute('aria-selected', String(tab.dataset.view === view));
    }
    for (const name of ['head', 'model', 'figure']) $(`${name}-view`).hidden = name !== view;
    $('toolbar').hidden = view === 'figure';
    for (const element of document.querySelectorAll('.head-only')) element.hidden = view !== 'head';
    draw();
  }

  function fillKinds() {
    const select = $('kind');
    data.kinds.forEach((k) => htmlElement('option', { value: k.name }, k.title, select));
    select.addEventListener('change', () => {
      state.kind = data.kinds.findIndex((k) => k.name === select.value);
      state.layer = Math.min(state.layer, kind().layers - 1);
      state.hover = null;
      fillLayers();
      fillHeadToggles();
      draw();
    });
  }

  function fillLayers() {
    const select = $('layer');
    select.replaceChildren();
    for (let layer = 0; layer < kind().layers; ++layer) {
      htmlElement('option', { value: layer }, `layer ${layer}`, select);
    }
    select.value = String(state.layer);
  }

  function fillHeadToggles() {
    const box = $('head-toggles');
    box.replaceChildren();
    for (let head = 0; head < kind().heads; ++head) {
      const button = htmlElement('button', {
        type: 'button', class: 'head-toggle', 'data-head': head,
        'aria-pressed': String(!state.off.has(head)),
        title: `head ${head}: click to hide or show, double-click to show it alone`,
      }, null, box);
      htmlElement('span', { class: 'swatch' }, null, button).style.background = colour(head);
      button.appendChild(document.createTextNode(`head ${head}`));
    }
  }

  function setHeads(off) {
    state.off = off;
    for (const button of document.querySelectorAll('.head-toggle')) {
      button.setAttribute('aria-pressed', String(!off.has(Number(button.dataset.head))));
    }
    draw();
  }

  function wireControls() {
    for (const tab of document.querySelectorAll('.tab')) {
      tab.addEventListener('click', () => showView(tab.dataset.view));
    }
    $('layer').addEventListener('change', () => {
      state.layer = Number($('layer').value);
      draw();
    });
    const toggles = $('head-toggles');
    toggles.addEventListener('click', (event) => {
      const button = event.target.closest('.head-toggle');
      if (!button) return;
      const head = Number(button.dataset.head);
      const off = new Set(state.off);
      if (off.has(head)) off.delete(head); else off.add(head);
      setHeads(off);
    });
    toggles.addEventListener('dblclick', (event) => {
      const button = event.target.closest('.head-toggle');
      if (!button) return;
      const head = Number(button.dataset.head);
      setHeads(new Set([...Array(kind().heads).keys()].filter((h) => h !== head)));
    });
    $('all-heads').addEventListener('click', () => setHeads(new Set()));
    $('detail-close').addEventListener('click', closeDetail);
    $('detail').addEventListener('click', (event) => {
      if (event.target === $('detail')) closeDetail();
    });
    document.addEventListener('keydown', (event) => {
      if (event.key === 'Escape') closeDetail();
    });
  }

  // ---- the head view: queries left, keys right, one line per head and visible pair ----

  const ROW = 24;     // pixels per token
  const TOP = 30;     // room for the column titles
  const SPAN = 260;   // the width the lines cross
  const head = { lines: null, geometry: null };  // the head view's line group and x positions

  function drawHeadView() {
    const svg = $('head-svg');
    const k = kind();
    svg.replaceChildren();
    const width = (tokens) => Math.max(40, ...tokens.map((t) => textWidth(t, svg)));
    const left = width(k.queries) + 16, right = width(k.keys) + 16;
    const x1 = left + 8, x2 = x1 + SPAN;
    const rows = Math.max(k.queries.length, k.keys.length);
    svg.setAttribute('width', x2 + 8 + right);
    svg.setAttribute('height', TOP + rows * ROW + 8);
    svgElement('text', { class: 'column-title', x: left - 8, y: 14, 'text-anchor': 'end' }, svg)
      .textContent = 'queries';
    svgElement('text', { class: 'column-title', x: x2 + 8, y: 14 }, svg).textContent = 'keys';
    head.lines = svgElement('g', { id: 'attention-lines' }, svg);
    head.geometry = { x1, x2 };
    const column = (tokens, side, x, w, anchor, textX) => {
      tokens.forEach((token, i) => {
        const g = svgElement('g', { class: `token ${side}`, 'data-index': i }, svg);
        svgElement('rect', { x, y: TOP + i * ROW + 1, width: w, height: ROW - 2 }, g);
        const y = TOP + i * ROW + ROW / 2;
        const text = svgElement('text', { x: textX, y, 'text-anchor': anchor }, g);
        text.textContent = token;
        g.addEventListener('mouseenter', () => hover({ side, index: i }));
        g.addEventListener('mouseleave', () => hover(null));
      });
    };
    column(k.queries, 'query', 0, left, 'end', left - 8);
    column(k.keys, 'key', x2, right + 8, 'start', x2 + 8);
    drawLines();
  }

  function hover(target) {
    state.hover = target;
    drawLines();
  }

  // The lines of the enabled heads; with a token hovered, only the lines from or to it.
  function drawLines() {
    const k = kind(), weights = k.weights[state.layer], { x1, x2 } = head.geometry;
    const hovered = state.hover;
    const y = (i) => TOP + i * ROW + ROW / 2;
    const fragment = document.createDocumentFragment();
    for (const h of enabledHeads()) {
      const stroke = colour(h);
      for (let q = 0; q < k.queries.length; ++q) {
        if (hovered && hovered.side === 'query' && hovered.index !== q) continue;
        for (let key = 0; key < visibleKeys(k, q); ++key) {
          if (hovered && hovered.side === 'key' && hovered.index !== key) continue;
          svgElement('line', {
            class: 'attention-line', x1, y1: y(q), x2, y2: y(key), stroke,
            'stroke-opacity': weights[h][q][key], 'data-head': h, 'data-query': q, 'data-key': key,
          }, fragment);
        }
      }
    }
    head.lines.replaceChildren(fragment);
    for (const g of $('head-svg').querySelectorAll('.token')) {
      const active = hovered && g.classList.contains(hovered.side) &&
        Number(g.dataset.index) === hovered.index;
      g.classList.toggle('active', Boolean(active));
    }
  }

  // ---- the model view: layers x heads of small heat maps ----

  const THUMB = 84;  // the longer side of a thumbnail, in pixels

  // A heat map of one layer and head on a canvas, one pixel per weight (scaled up by CSS).
  function heatCanvas(k, layer, h) {
    const nq = k.queries.length, nk = k.keys.length;
    const canvas = document.createElement('canvas');
    canvas.width = Math.max(1, nk);
    canvas.height = Math.max(1, nq);
    const cell = THUMB / Math.max(1, nq, nk);
    canvas.style.width = `${canvas.width * cell}px`;
    canvas.style.height = `${canvas.height * cell}px`;
    const context = canvas.getContext('2d');
    const image = context.createImageData(canvas.width, canvas.height);
    for (let q = 0; q < nq; ++q) {
      for (let key = 0; key < nk; ++key) {
        const masked = key >= visibleKeys(k, q);
        const [r, g, b] = masked ? [240, 242, 245] : shade(colour(h), k.weights[layer][h][q][key]);
        image.data.set([r, g, b, 255], (q * nk + key) * 4);
      }
    }
    context.putImageData(image, 0, 0);
    return canvas;
  }

  function drawModelView() {
    const k = kind(), grid = $('model-grid');
    grid.replaceChildren();
    grid.style.gridTemplateColumns = `max-content repeat(${k.heads}, max-content)`;
    htmlElement('div', { class: 'axis' }, '', grid);
    for (let h = 0; h < k.heads; ++h) {
      htmlElement('div', { class: 'axis column' }, `head ${h}`, grid);
    }
    for (let layer = 0; layer < k.layers; ++layer) {
      htmlElement('div', { class: 'axis row' }, `layer ${layer}`, grid);
      for (let h = 0; h < k.heads; ++h) {
        const thumb = htmlElement('div', {
          class: 'thumb', 'data-layer': layer, 'data-head': h, tabindex: 0, role: 'button',
          title: `layer ${layer}, head ${h}: click to open`,
        }, null, grid);
        thumb.appendChild(heatCanvas(k, layer, h));
        thumb.addEventListener('click', () => openDetail(layer, h));
        thumb.addEventListener('keydown', (event) => {
          if (event.key === 'Enter' || event.key === ' ') openDetail(layer, h);
        });
      }
    }
  }

  // ---- the large view of one head: queries down, keys across, labelled ----

  function openDetail(layer, h) {
    const k = kind(), svg = $('detail-svg');
    const nq = k.queries.length, nk = k.keys.length;
    $('detail-title').textContent = `${k.title} · layer ${layer} · head ${h}`;
    $('detail').hidden = false;
    svg.replaceChildren();
    svg.dataset.layer = layer;
    svg.dataset.head = h;
    const cell = Math.max(16, Math.min(30, Math.floor(600 / Math.max(1, nq, nk))));
    const left = Math.max(30, ...k.queries.map((t) => textWidth(t, svg))) + 28;
    // Key labels are turned 60 degrees: their height is sin(60) of their width.
    const top = Math.max(30, ...k.keys.map((t) => textWidth(t, svg))) * 0.87 + 34;
    const legend = 46;
    svg.setAttribute('width', left + nk * cell + 16 + cell);
    svg.setAttribute('height', top + nq * cell + legend);
    svgElement('text', { x: 4, y: 14 }, svg).textContent = 'query ↓  key →';
    k.queries.forEach((token, q) => {
      svgElement('text', {
        x: left - 8, y: top + q * cell + cell / 2,
        'text-anchor': 'end', 'dominant-baseline': 'central',
      }, svg).textContent = token;
    });
    k.keys.forEach((token, key) => {
      const x = left + key * cell + cell / 2, y = top - 8;
      const label = svgElement('text', { transform: `translate(${x} ${y}) rotate(-60)` }, svg);
      label.textContent = token;
    });
    for (let q = 0; q < nq; ++q) {
      for (let key = 0; key < nk; ++key) {
        const attributes = { x: left + key * cell, y: top + q * cell, width: cell, height: cell };
        if (key >= visibleKeys(k, q)) {
          svgElement('rect', { ...attributes, class: 'detail-cell masked' }, svg);
          continue;
        }
        const weight = k.weights[layer][h][q][key];
        const rect = svgElement('rect', {
          ...attributes, class: 'detail-cell', fill: `rgb(${shade(colour(h), weight).join(',')})`,
        }, svg);
        svgElement('title', {}, rect).textContent =
          `${k.queries[q]} → ${k.keys[key]}: ${weight.toFixed(4)}`;
      }
    }
    // The legend: the colour of weights 0 to 1.
    const y = top + nq * cell + 18, w = Math.min(200, Math.max(120, nk * cell));
    for (let i = 0; i < 20; ++i) {
      svgElement('rect', {
        x: left + (i * w) / 20, y, width: w / 20 + 0.5, height: 10,
        fill: `rgb(${shade(colour(h), (i + 0.5) / 20).join(',')})`,
      }, svg);
    }
    svgElement('text', { x: left - 6, y: y + 9, 'text-anchor': 'end' }, svg).textContent = '0';
    svgElement('text', { x: left + w + 6, y: y + 9 }, svg).textContent = '1';
    $('detail-close').focus();
  }

  function closeDetail() {
    $('detail').hidden = true;
  }

  // ---- start ----

  function draw() {
    if (!data.kinds.length) return;
    if (state.view === 'head') drawHeadView();
    if (state.view === 'model') drawModelView();
  }

  fillHeader();
  if (!data.kinds.length) {
    $('head-view').textContent = 'This page holds no attention weights.';
  } else {
    fillKinds();
    fillLayers();
    fillHeadToggles();
  }
  wireControls();
  showView('head');
})();
