// Drives /usr/bin/chromium through playwright-core over one exported page and prints what it saw as JSON.
// argv: <playwright-core dir> <page.html> <episode id to expand> <filter words> <screenshot.png>
const [pwDir, page_, expandId, words, shot] = process.argv.slice(2);
const { chromium } = require(pwDir);
const { pathToFileURL } = require('url');

(async () => {
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--no-sandbox', '--headless=new', '--disable-background-networking', '--disable-component-update',
           '--disable-sync', '--no-first-run'],
  });
  const out = { requests: [], blocked: [], errors: [] };
  try {
    const context = await browser.newContext({ viewport: { width: 1200, height: 800 } });
    const url = pathToFileURL(page_).href;
    await context.route('**/*', (route) => {
      const u = route.request().url();
      if (u === url) return route.continue();
      out.blocked.push(u);
      return route.abort();
    });
    const page = await context.newPage();
    page.on('request', (r) => out.requests.push(r.url()));
    page.on('pageerror', (e) => out.errors.push(String(e)));
    page.on('dialog', (d) => { out.errors.push('dialog: ' + d.message()); d.dismiss(); });
    await page.goto(url, { waitUntil: 'load' });
    out.title = await page.title();
    out.timeline = await page.$$eval('.episode', (els) => els.map((e) => ({
      id: e.dataset.id, state: e.querySelector('.state').textContent, open: e.open })));
    out.images = await page.$$eval('img', (els) => els.length);
    const ep = page.locator(`.episode[data-id="${expandId}"]`);
    out.promptVisibleBefore = await ep.locator('pre.prompt').first().isVisible();
    await ep.locator('summary').click();
    out.prompts = await ep.locator('pre.prompt').allInnerTexts();
    out.promptVisibleAfter = await ep.locator('pre.prompt').first().isVisible();
    await page.fill('#q', words);
    out.visibleAfterFilter = await page.$$eval('.episode', (els) => els.filter((e) => e.offsetParent !== null)
      .map((e) => e.dataset.id));
    out.count = await page.locator('#count').innerText();
    await page.fill('#q', '');
    out.visibleAfterClear = await page.$$eval('.episode', (els) => els.filter((e) => e.offsetParent !== null).length);
    await page.screenshot({ path: shot, fullPage: true });
  } finally {
    await browser.close();
  }
  console.log(JSON.stringify(out));
})().catch((e) => { console.error(e && e.stack || String(e)); process.exit(1); });
