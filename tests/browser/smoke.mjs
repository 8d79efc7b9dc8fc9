// Smoke test of the harness itself: open a notebook, run all cells, read an
// output; then run the first cell again from the keyboard and time its output.
// params: { notebook, needle = "hi" }
import { cellOutputText, openNotebook, runAllCells, runCell, scenario, watchOutput } from './lab.mjs';

await scenario(async ({ page, params }) => {
  const needle = params.needle ?? 'hi';
  const openMs = await openNotebook(page, params.notebook);
  const runAllMs = await runAllCells(page);
  const outputs = [];
  const n = await page.evaluate(() => window.jupyterapp.shell.currentWidget.content.widgets.length);
  for (let i = 0; i < n; i++) outputs.push(await cellOutputText(page, i));

  const watch = await watchOutput(page, 0, needle);
  await runCell(page, 0, { via: 'keyboard' });
  const { ms: keyboardOutputMs } = await watch.wait();
  return { open_ms: openMs, run_all_ms: runAllMs, outputs, keyboard_output_ms: keyboardOutputMs };
});
