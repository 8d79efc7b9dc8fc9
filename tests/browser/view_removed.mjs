// The chat's view is removed from the page mid-answer while the page stays connected
// (its output cleared): the view says bye, and once the widget's last view left and
// none came back within its grace period, the kernel stops what runs (ViewRoster in
// nbstream/widgets/widget.py). Then the kernel is asked for the reply's status.
// params: { notebook, min_chars = 200 }
import { answerUnderWay, kernelJson } from './record.mjs';
import { scenario } from './lab.mjs';

await scenario(async ({ page, params, log }) => {
  await answerUnderWay(page, params.notebook, params.min_chars ?? 200);
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.evaluate(() => window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs'));
  await page.waitForFunction(() => document.querySelectorAll('.nbs-chat').length === 0, null, { timeout: 30_000 });
  const removedAt = Date.now();
  let reply = null;
  for (let i = 0; i < 30; i++) {
    reply = await kernelJson(page, 'print(_nbs_json.dumps({"status": chat.last.status, "chars": len(chat.last.text)}))');
    if (reply.status !== 'running') break;
    await page.waitForTimeout(1000); // (the grace period runs in the kernel)
  }
  log(`reply ${JSON.stringify(reply)} ${Date.now() - removedAt} ms after the view was removed`);
  return { reply, after_ms: Date.now() - removedAt, page_errors: errors };
});
