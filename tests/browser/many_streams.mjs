// Many streams at once through one kernel (benchmarks/many_streams.py): W Compare
// widgets of P panes each stream their answers at the same time from one server, while
// a probe cell measures the kernel's responsiveness. Each answer's end on the page is
// noted (wall clock) when its message's status turns final, by a MutationObserver
// (reading every text every frame would cost the page more than it measures).
// params: { notebook, widgets, setup_cell = 0, probe_cell = 1, start_cell = 2, probes = 3,
//           probe_after_ms = 700, probe_every_ms = 1800,
//           report: Python printing the kernel's figures as JSON,
//           trace: a file for a Chrome trace (with a CPU profile) of the streaming part }
// Returns: the probes idle and while streaming (see probe()), long tasks, and per answer {root, pane, id, status,
// end_wall_ms, text} (the page's final text, to compare with the kernel's).
import fs from 'node:fs';
import { openNotebook, runCell, scenario, watchOutput } from './lab.mjs';
import { kernelJson, waitAllFinal, watchLongTasks } from './record.mjs';
import { analyseTrace, endTrace, startTrace } from './trace.mjs';

/**
 * One run of the probe cell from the keyboard (it prints "probe-ok" and the kernel's
 * time.time()): the whole round trip (ms: from Playwright's click on the cell, whose
 * checks that the cell is visible and still take frames of a busy page, to its output
 * on the page; from_click_ms: from the page's mousedown, as a person's click), and its
 * parts on the wall clock: from the Shift+Enter keydown to
 * the kernel running the cell (to_kernel_ms; of it page_ms until the execute_request
 * left the page's websocket, and sent_to_ran_ms for the server relaying it and the
 * kernel's queue: the kernel's own responsiveness), and from there to the output shown
 * (back_ms: the kernel's output relayed, the page drawing it).
 */
async function probe(page, cellIndex, timeout) {
  await page.evaluate(() => {
    window.__nbsKeydown = null;
    window.__nbsMousedown = null;
    window.__nbsSent = null;
    if (!window.__nbsKeydownListening) {
      window.__nbsKeydownListening = true;
      window.addEventListener(
        'mousedown',
        () => {
          if (window.__nbsMousedown === null) window.__nbsMousedown = performance.timeOrigin + performance.now();
        },
        { capture: true },
      );
      // when the execute_request leaves the page (the kernel's websocket)
      const send = WebSocket.prototype.send;
      const decoder = new TextDecoder();
      WebSocket.prototype.send = function (data) {
        if (window.__nbsKeydown !== null && window.__nbsSent === null) {
          const text =
            typeof data === 'string' ? data : data instanceof Blob ? '' : decoder.decode(data);
          if (text.includes('"execute_request"')) {
            window.__nbsSent = performance.timeOrigin + performance.now();
          }
        }
        return send.call(this, data);
      };
      window.addEventListener(
        'keydown',
        (ev) => {
          if (ev.key === 'Enter' && window.__nbsKeydown === null) {
            window.__nbsKeydown = performance.timeOrigin + performance.now();
          }
        },
        { capture: true },
      );
    }
  });
  const watch = await watchOutput(page, cellIndex, 'probe-ok', { timeout });
  await runCell(page, cellIndex, { via: 'keyboard' });
  const seen = await watch.wait();
  const { mousedown, keydown, sent } = await page.evaluate(() => ({
    mousedown: window.__nbsMousedown,
    keydown: window.__nbsKeydown,
    sent: window.__nbsSent,
  }));
  const ran = Number.parseFloat(seen.text.split('probe-ok')[1]) * 1000;
  return {
    ms: Math.round(seen.ms),
    from_click_ms: mousedown === null ? null : Math.round(seen.seen_wall - mousedown),
    to_kernel_ms: Math.round(ran - keydown),
    page_ms: sent === null ? null : Math.round(sent - keydown),
    sent_to_ran_ms: sent === null ? null : Math.round(ran - sent),
    back_ms: Math.round(seen.seen_wall - ran),
    at_wall_ms: keydown,
  };
}

/** The page loop's work over the stream: its counters' differences, and its frames. */
function loopFigures(before, after) {
  const diff = {};
  for (const k of ['frames', 'render_frames', 'runs', 'urgent_runs', 'deferred', 'long_frames', 'long_render_frames', 'inputs', 'input_held_frames']) {
    diff[k] = (after[k] ?? 0) - (before[k] ?? 0);
  }
  const recent = after.recent ?? [];
  const q = (xs, p) => {
    if (xs.length === 0) return null;
    const s = [...xs].sort((a, b) => a - b);
    return s[Math.min(s.length - 1, Math.floor(p * s.length))];
  };
  const costs = recent.map((f) => f.cost_ms).filter((c) => c !== null);
  return {
    ...diff,
    views: after.views,
    recent_frames: recent.length,
    views_per_frame_p50: q(recent.map((f) => f.views), 0.5),
    script_ms_p50: q(recent.map((f) => f.script_ms), 0.5),
    settle_ms_p50: q(recent.map((f) => f.settle_ms), 0.5),
    cost_ms_p50: q(costs, 0.5),
    cost_ms_p95: q(costs, 0.95),
    spacing_ms: after.spacing_ms,
    budget_ms: after.budget_ms,
  };
}

/** msg_type of a kernel websocket frame (v1 binary protocol or JSON): the header's comes first. */
function msgType(payload) {
  const head = typeof payload === 'string' ? payload.slice(0, 4000) : payload.subarray(0, 4000).toString('latin1');
  const m = /"msg_type":\s*"([a-z_]+)"/.exec(head);
  return m ? m[1] : 'unknown';
}

await scenario(async ({ page, params }) => {
  const n = params.widgets ?? 8;
  const probeCell = params.probe_cell ?? 1;
  // the kernel's websocket frames while the answers stream, by msg_type, each way
  const frames = { on: false, received: {}, sent: {} };
  page.on('websocket', (ws) => {
    if (!ws.url().includes('/channels')) return;
    ws.on('framereceived', (f) => {
      if (frames.on) frames.received[msgType(f.payload)] = (frames.received[msgType(f.payload)] ?? 0) + 1;
    });
    ws.on('framesent', (f) => {
      if (frames.on) frames.sent[msgType(f.payload)] = (frames.sent[msgType(f.payload)] ?? 0) + 1;
    });
  });
  await openNotebook(page, params.notebook);
  await runCell(page, params.setup_cell ?? 0);
  await page.waitForFunction((n) => document.querySelectorAll('.nbs-chat').length >= n, n, { timeout: 60_000 });

  const probes = params.probes ?? 3;
  const idle = [];
  for (let i = 0; i < probes; i++) idle.push(await probe(page, probeCell, 30_000));

  await page.evaluate(() => {
    window.__nbsEnds = {};
    const FINAL = new Set(['done', 'stopped', 'error', 'timeout']);
    new MutationObserver((records) => {
      const wall = performance.timeOrigin + performance.now();
      for (const r of records) {
        const m = r.target;
        const key = `${m.closest?.('.nbs-chat')?.dataset.nbsIndex}:${m.dataset?.id}`;
        if (m.dataset?.role === 'assistant' && FINAL.has(m.dataset.status) && !(key in window.__nbsEnds)) {
          window.__nbsEnds[key] = wall;
        }
      }
    }).observe(document.body, { subtree: true, attributes: true, attributeFilter: ['data-status'] });
    document.querySelectorAll('.nbs-chat').forEach((root, i) => {
      root.dataset.nbsIndex = String(i);
    });
  });
  const long = await watchLongTasks(page);
  const tracing = params.trace ? await startTrace(page, { profile: true }) : null;
  // the page loop's counters before the stream (scheduler.ts; the stream's are the difference)
  const loopStats = () =>
    page.evaluate(() => {
      const l = window.__nbstreamFrames1;
      return l ? JSON.parse(JSON.stringify(l.stats)) : null;
    });
  const loopBefore = await loopStats();
  await page.evaluate(() => performance.mark('nbs-trace-start'));
  frames.on = true;
  const startWall = await page.evaluate(() => {
    performance.mark('nbs-stream-start');
    return performance.timeOrigin + performance.now();
  });
  await runCell(page, params.start_cell ?? 2);
  // probes while the answers stream: the first after probe_after_ms, then one every
  // probe_every_ms (each after the one before answered)
  const busy = [];
  for (let i = 0; i < probes; i++) {
    const due = startWall + (params.probe_after_ms ?? 700) + i * (params.probe_every_ms ?? 1800);
    const wait = due - (await page.evaluate(() => performance.timeOrigin + performance.now()));
    if (wait > 0) await page.waitForTimeout(wait);
    busy.push(await probe(page, probeCell, 120_000));
  }
  for (let i = 0; i < n; i++) await waitAllFinal(page, { index: i, timeout: 180_000 });
  const endWall = await page.evaluate(() => {
    performance.mark('nbs-stream-end');
    return performance.timeOrigin + performance.now();
  });
  frames.on = false;
  const loopAfter = await loopStats();
  await page.waitForTimeout(300);
  const longTasks = await long.read();
  let explained = null;
  if (tracing !== null) {
    const events = await endTrace(tracing);
    fs.writeFileSync(params.trace, JSON.stringify({ traceEvents: events }));
    explained = analyseTrace(events, { maxTasks: 20 });
  }
  const answers = await page.evaluate(() =>
    [...document.querySelectorAll('.nbs-chat')].flatMap((root, i) =>
      [...root.querySelectorAll('.nbs-message[data-role="assistant"]')].map((m) => ({
        root: i,
        pane: m.dataset.pane === undefined ? null : Number(m.dataset.pane),
        id: m.dataset.id,
        status: m.dataset.status,
        end_wall_ms: window.__nbsEnds[`${i}:${m.dataset.id}`] ?? null,
        text: m.querySelector('.nbs-text')?.textContent ?? '',
      })),
    ),
  );
  // the characters of text each widget shows (its counter), and its question's copies (a
  // Compare shows the question in every pane)
  const chars = await page.evaluate(() =>
    [...document.querySelectorAll('.nbs-chat')].map((r) => ({
      chars: r.__nbstream.chars,
      // acks sent, and the messages that carried them (a round of a Compare's panes: one)
      acks: r.__nbstream.acks,
      ack_msgs: r.__nbstream.ack_msgs,
      questions: r.querySelectorAll('.nbs-message[data-role="user"]').length,
    })),
  );
  const kernel = params.report ? await kernelJson(page, params.report) : null;
  return {
    kernel,
    chars,
    start_wall_ms: startWall,
    end_wall_ms: endWall,
    ws_frames: frames,
    loop: loopAfter && loopBefore ? loopFigures(loopBefore, loopAfter) : null,
    probes_idle: idle,
    probes_busy: busy,
    long_tasks: longTasks.count,
    long_max_ms: Math.round(longTasks.max_ms),
    answers,
    ...(explained ? { trace: explained } : {}),
  };
});
