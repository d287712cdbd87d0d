// The attention page (tfm attention -o page.html) in a real browser: Debian's chromium, headless,
// driven by playwright-core (tests/browser/package.json; scripts/setup.sh installs both). CTest runs
//   node tests/browser/attention_page.test.mjs BUILD_DIR
// which writes a tiny model (BUILD_DIR/tfm_browser_fixture), its page (BUILD_DIR/tfm attention) and
// screenshots of the three views (BUILD_DIR/browser/screenshots). `--page FILE` after BUILD_DIR tests
// an existing page instead (for work on the page itself). Every expected count comes from the page's
// own data (the JSON of #tfm-data), never from the fixture's dimensions.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const chromiumPath = process.env.TFM_CHROMIUM || '/usr/bin/chromium';
const setupHint = 'scripts/setup.sh installs it (Debian packages chromium and nodejs, then ' +
  '`npm ci` in tests/browser)';

// Missing tools fail the test, saying how to install them: a browser test that skipped itself
// would pass a page nobody looked at.
function die(message) {
  console.error(`attention_page.test.mjs: ${message}`);
  process.exit(1);
}

const [buildArg, ...rest] = process.argv.slice(2);
if (!buildArg) die('usage: node tests/browser/attention_page.test.mjs BUILD_DIR [--page FILE]');
const buildDir = path.resolve(buildArg);
const givenPage = rest[0] === '--page' ? path.resolve(rest[1] ?? '') : null;
if (!existsSync(chromiumPath)) die(`no browser at ${chromiumPath}; ${setupHint}`);
let chromium;
try {
  ({ chromium } = await import('playwright-core'));
} catch (error) {
  die(`cannot load playwright-core from ${here}/node_modules (${error.message}); ${setupHint}`);
}

const outDir = path.join(buildDir, 'browser');
const screenshots = path.join(outDir, 'screenshots');
const SOURCE = 'Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.';
const TARGET = 'Two young, White males are outside near many bushes.';

// The page under test: a tiny random model's attention on one sentence pair.
function writePage() {
  if (givenPage) return givenPage;
  rmSync(outDir, { recursive: true, force: true });
  mkdirSync(outDir, { recursive: true });
  const run = (program, args) => {
    try {
      execFileSync(program, args, { stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8' });
    } catch (error) {
      die(`${[program, ...args].join(' ')} failed (${error.status ?? error.code}):\n` +
        `${error.stdout ?? ''}${error.stderr ?? ''}`);
    }
  };
  run(path.join(buildDir, 'tfm_browser_fixture'), [outDir]);
  const page = path.join(outDir, 'page.html');
  run(path.join(buildDir, 'tfm'), ['attention', '-m', path.join(outDir, 'model'), '-i', SOURCE,
    '--target', TARGET, '-o', page]);
  return page;
}

// Pairs (query, key) that query q may see: every key, or keys 0..q in a causal kind.
const visible = (kind, q) => (kind.causal ? Math.min(q + 1, kind.keys.length) : kind.keys.length);
const pairs = (kind) => kind.queries.reduce((sum, _, q) => sum + visible(kind, q), 0);

describe('attention page', () => {
  let browser, page, pageUrl, data;
  const requests = [], blocked = [], errors = [];

  before(async () => {
    mkdirSync(screenshots, { recursive: true });
    pageUrl = pathToFileURL(writePage()).href;
    browser = await chromium.launch({ executablePath: chromiumPath, args: ['--no-sandbox'] });
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    // Everything the page asks for is recorded, and anything but the page itself is refused.
    await context.route('**/*', (route) => {
      if (route.request().url() === pageUrl) return route.continue();
      blocked.push(route.request().url());
      return route.abort();
    });
    page = await context.newPage();
    page.on('request', (request) => requests.push(request.url()));
    page.on('console', (message) => {
      if (message.type() === 'error') errors.push(`console: ${message.text()}`);
    });
    page.on('pageerror', (error) => errors.push(`page error: ${error.message}`));
  });

  after(async () => {
    await browser?.close();
  });

  // A fresh load for each test: no state carried between them.
  async function load() {
    requests.length = 0;
    await page.goto(pageUrl, { waitUntil: 'load' });
    data = await page.evaluate(() => JSON.parse(document.getElementById('tfm-data').textContent));
  }

  const lineCount = () => page.locator('#head-view svg line.attention-line').count();
  const selectedKind = async () => {
    const name = await page.locator('select#kind').inputValue();
    return data.kinds.find((kind) => kind.name === name);
  };
  // Every drawn line as {head, query, key, stroke, opacity}.
  const lines = () => page.$$eval('#head-view svg line.attention-line', (all) => all.map((l) => ({
    head: Number(l.dataset.head), query: Number(l.dataset.query), key: Number(l.dataset.key),
    stroke: l.getAttribute('stroke'), opacity: Number(l.getAttribute('stroke-opacity')),
  })));

  it('loads without errors and without any request but its own file', async () => {
    await load();
    assert.equal(data.format, 'tfm-attention/1');
    assert.ok(data.kinds.length > 0, 'the page holds no kind of attention');
    await page.waitForTimeout(200);  // anything late (a font, an image) would show up here
    assert.deepEqual(errors, []);
    assert.deepEqual(blocked, []);
    assert.deepEqual(requests, [pageUrl]);
  });

  it('draws one line per enabled head and visible pair, coloured by head, opaque by weight', async () => {
    await load();
    const kind = await selectedKind();
    const layer = Number(await page.locator('select#layer').inputValue());
    assert.equal(await lineCount(), kind.heads * pairs(kind));
    for (const line of await lines()) {
      assert.equal(line.stroke, data.colors[line.head]);
      assert.ok(Math.abs(line.opacity - kind.weights[layer][line.head][line.query][line.key]) < 1e-9);
    }
    await page.screenshot({ path: path.join(screenshots, 'head.png'), fullPage: true });
  });

  it('shows only a hovered token\'s lines, and all of them again when the mouse leaves', async () => {
    await load();
    for (const kind of data.kinds) {
      await page.locator('select#kind').selectOption(kind.name);
      const total = kind.heads * pairs(kind);
      assert.equal(await lineCount(), total, kind.name);
      const q = Math.floor(kind.queries.length / 2);
      await page.locator(`.token.query[data-index="${q}"]`).hover();
      const fromQ = await lines();
      assert.equal(fromQ.length, kind.heads * visible(kind, q), `${kind.name}: query ${q}`);
      assert.ok(fromQ.every((line) => line.query === q));
      await page.mouse.move(1, 1);
      assert.equal(await lineCount(), total, `${kind.name}: after leaving query ${q}`);
      const k = 0;  // key 0: every query sees it, causal or not
      await page.locator(`.token.key[data-index="${k}"]`).hover();
      const toK = await lines();
      assert.equal(toK.length, kind.heads * kind.queries.length, `${kind.name}: key ${k}`);
      assert.ok(toK.every((line) => line.key === k));
      await page.mouse.move(1, 1);
      assert.equal(await lineCount(), total, `${kind.name}: after leaving key ${k}`);
    }
  });

  it('hides a head\'s lines on a click on its toggle, and shows them on a second', async () => {
    await load();
    const kind = await selectedKind();
    const total = kind.heads * pairs(kind);
    const head = kind.heads - 1;
    const toggle = page.locator(`.head-toggle[data-head="${head}"]`);
    assert.equal(await page.locator('.head-toggle').count(), kind.heads);
    await toggle.click();
    assert.equal(await toggle.getAttribute('aria-pressed'), 'false');
    assert.equal(await lineCount(), total - pairs(kind));
    assert.ok((await lines()).every((line) => line.head !== head));
    await toggle.click();
    assert.equal(await toggle.getAttribute('aria-pressed'), 'true');
    assert.equal(await lineCount(), total);
  });

  it('draws the chosen layer\'s weights and the chosen kind\'s tokens', async () => {
    await load();
    for (const kind of data.kinds) {
      await page.locator('select#kind').selectOption(kind.name);
      const texts = (side) => page.$$eval(`#head-view .token.${side} text`,
        (all) => all.map((t) => t.textContent));
      assert.deepEqual(await texts('query'), kind.queries, `${kind.name}: queries`);
      assert.deepEqual(await texts('key'), kind.keys, `${kind.name}: keys`);
      assert.ok(kind.layers >= 2, `${kind.name}: the fixture needs 2 layers or more`);
      for (const layer of [kind.layers - 1, 0]) {
        await page.locator('select#layer').selectOption(String(layer));
        const drawn = await lines();
        assert.equal(drawn.length, kind.heads * pairs(kind));
        for (const line of drawn) {
          const expected = kind.weights[layer][line.head][line.query][line.key];
          assert.ok(Math.abs(line.opacity - expected) < 1e-9,
            `${kind.name} layer ${layer}: ${JSON.stringify(line)}, expected ${expected}`);
        }
      }
      // The layers differ, so the check above saw the selector change what is drawn.
      const flat = (layer) => kind.weights[layer].flat(3).join();
      assert.notEqual(flat(0), flat(kind.layers - 1), `${kind.name}: layers 0 and last are equal`);
    }
  });

  it('shows every layer and head in the model view, and one of them large on a click', async () => {
    await load();
    await page.locator('#tab-model').click();
    const kind = await selectedKind();
    assert.equal(await page.locator('#model-view .thumb').count(), kind.layers * kind.heads);
    assert.equal(await page.locator('#head-view').isVisible(), false);
    assert.equal(await page.locator('select#layer').isVisible(), false);  // all layers are shown
    await page.screenshot({ path: path.join(screenshots, 'model.png'), fullPage: true });
    const [layer, head] = [kind.layers - 1, kind.heads - 1];
    await page.locator(`.thumb[data-layer="${layer}"][data-head="${head}"]`).click();
    assert.ok(await page.locator('#detail').isVisible());
    assert.match(await page.locator('#detail-title').textContent(), new RegExp(
      `layer ${layer} · head ${head}`));
    assert.equal(await page.locator('#detail-svg rect.detail-cell').count(),
      kind.queries.length * kind.keys.length);
    await page.screenshot({ path: path.join(screenshots, 'model-large.png') });
    await page.locator('#detail-close').click();
    assert.equal(await page.locator('#detail').isVisible(), false);
  });

  it('shows the paper\'s figure in the figure view', async () => {
    await load();
    await page.locator('#tab-figure').click();
    assert.ok(await page.locator('#figure-view svg').first().isVisible());
    assert.equal(await page.locator('#head-view').isVisible(), false);
    assert.equal(await page.locator('select#kind').isVisible(), false);  // the figure is static
    await page.screenshot({ path: path.join(screenshots, 'figure.png'), fullPage: true });
    assert.deepEqual(errors, []);  // and no error in any test before
    assert.deepEqual(blocked, []);
  });
});
