"""What one turn of a chat costs on the wire, at turn 1 and at turn 200: before and after
messages became per-message state keys (issue 11).

A real IPython kernel (jupyter_client, no browser) runs a ``ChatWidget`` on a
``ScriptedSource`` that answers every prompt with the same reply (``--chars``
characters, 2,000 by default); the client reads every comm message of the
widget on IOPub and adds up the bytes of each message's content (comm id and
data, as JSON: what the kernel hands the server for the browser). Counts, not
times: the figures do not depend on the machine's speed or load.

Two ways, each in its own kernel:

* **before**: the code of ``--before-ref`` (default ``d12a117``, main before
  parts), unpacked with ``git archive``: every status change re-publishes the
  whole ``conversation`` list;
* **after**: this tree: per-message keys, deltas as immutable keys.

Printed: the bytes of turn k for k in ``--at`` (default 1, 10, 50, 100, 200),
the total over all turns, and one reply's bytes against its text (target:
turn 200 within 10% of turn 1; one reply <= 1.2x its text + 150 B per comm message).

``--attach-at K`` (issue 21) asks turn K with an image attached (a 1600 x 1200
photo-like image): its preview travels as a binary buffer in that turn, once;
the bytes counted are the messages' content and their buffers. Printed: the
buffer bytes of each turn that had any, and the turns after K against the ones
before (target: no buffer after turn K, the same bytes per turn).

    .venv/bin/python benchmarks/turn_bytes.py [--turns 200] [--chars 2000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _cells import shell, value
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import KernelManager, start_new_kernel

ROOT = Path(__file__).resolve().parents[1]
BEFORE_REF = "d12a117"

SETUP = """
from nbstream import ChatWidget
from nbstream.sources import ScriptedSource
REPLY = ''.join(f'w{{i}} ' for i in range(100000))[:{chars}]
chat = ChatWidget(ScriptedSource(REPLY, rate={rate}))
"""
# an image worth attaching: 1600 x 1200, photo-like (noise), so its preview is a JPEG
IMAGE = """
from PIL import Image
IMG = Image.effect_noise((1600, 1200), 60).convert("RGB")
"""
# --tools (#20): each turn is a tool call, its result, and the reply: the parts of the
# tool loop travel under the message's own keys too, so a turn still costs what turn 1 did
SETUP_TOOLS = """
from nbstream import ChatWidget, tool
from nbstream.sources import ScriptedSource, call
REPLY = ''.join(f'w{{i}} ' for i in range(100000))[:{chars}]
def lookup(q: str) -> str:
    '''Look something up.

    Args:
        q: what to look up
    '''
    return 'the answer to ' + q + ': ' + 'x' * 200
chat = ChatWidget(ScriptedSource(rounds=[[call('lookup', q='the weather')], REPLY], rate={rate}),
                  tools=[tool(lookup, approve=True)])
"""
# the reply ends in r.wait(); the pump sends the final state in the same step, so a
# short sleep in the cell lets the last message of the turn leave before "idle"
TURN = "r = chat.send('question {k}'{extra}); r.wait(); import time; time.sleep(0.05)"


def _turn_bytes(kc: BlockingKernelClient, comm_id: str, k: int, attach: bool = False,
                buffers: list[int] | None = None) -> tuple[int, int]:
    """Run turn ``k``; (bytes, messages) of the widget's comm messages it caused (their
    content and their binary buffers); the buffers' bytes are added to ``buffers``."""
    msg_id = kc.execute(TURN.format(k=k, extra=", attachments=[IMG]" if attach else ""))
    total = count = 0
    while True:
        try:
            msg = kc.get_iopub_msg(timeout=60)
        except queue.Empty as exc:
            raise RuntimeError(f"turn {k}: no idle status") from exc
        if msg["msg_type"] == "comm_msg" and msg["content"]["comm_id"] == comm_id:
            binary = sum(len(b) for b in msg.get("buffers") or ())
            total += len(json.dumps(msg["content"], ensure_ascii=False).encode()) + binary
            count += 1
            if buffers is not None:
                buffers.append(binary)
        elif (msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle"
              and msg["parent_header"].get("msg_id") == msg_id):
            return total, count


def measure(pythonpath: str, turns: int, chars: int, rate: float,
            progress: Any = None, attach_at: int = 0, tools: bool = False) -> dict[str, Any]:
    """Turn bytes of ``turns`` turns in a fresh kernel importing nbstream from ``pythonpath``
    (turn ``attach_at`` with an image attached, 0: none; ``tools``: each turn calls a tool
    first, see SETUP_TOOLS)."""
    env = {**os.environ, "PYTHONPATH": pythonpath, "HF_HUB_OFFLINE": "1"}
    km: KernelManager
    km, kc = start_new_kernel(kernel_name="python3", env=env)
    try:
        shell(kc, (SETUP_TOOLS if tools else SETUP).format(chars=chars, rate=rate))
        if attach_at:
            shell(kc, IMAGE)
        comm_id = value(kc, "chat.model_id")
        origin = value(kc, "__import__('nbstream').__file__")
        text_len = value(kc, "len(REPLY)")
        per_turn: list[tuple[int, int]] = []
        binary: list[int] = []  # buffer bytes per turn
        for k in range(1, turns + 1):
            got: list[int] = []
            per_turn.append(_turn_bytes(kc, comm_id, k, attach=k == attach_at, buffers=got))
            binary.append(sum(got))
            if progress and (k in (1, 10) or k % 50 == 0):
                progress(f"  turn {k}: {per_turn[-1][0]:,} B in {per_turn[-1][1]} messages")
        texts_ok = value(kc, "all(r.text == REPLY for r in chat.replies)")
        out = {"origin": origin, "text_chars": text_len, "turns": per_turn, "texts_ok": texts_ok,
               "buffer_bytes": binary}
        if attach_at:
            mid = f"m{2 * attach_at - 1}"
            out["preview_bytes"] = value(kc, f"len(chat.get_state()['{mid}.a1'])")
            index = 2 * attach_at - 2
            out["image_bytes"] = value(kc, f"chat.messages[{index}]['attachments'][0].size")
        return out
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def before_tree(ref: str, dest: Path) -> Path:
    """The nbstream package of ``ref``, unpacked under ``dest`` (returns the folder to import)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "nbstream"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def table(before: dict[str, Any] | None, after: dict[str, Any], at: list[int]) -> str:
    rows = ["| turn k | before: bytes (messages) | after: bytes (messages) | after ÷ before |",
            "|---:|---:|---:|---:|"]
    for k in at:
        if k > len(after["turns"]):
            continue
        a, an = after["turns"][k - 1]
        b = before["turns"][k - 1] if before else None
        rows.append(f"| {k} | {f'{b[0]:,} ({b[1]})' if b else '—'} | {a:,} ({an}) | "
                    f"{f'{a / b[0]:.3f}' if b else '—'} |")
    tb = sum(t[0] for t in before["turns"]) if before else None
    ta = sum(t[0] for t in after["turns"])
    rows.append(f"| all {len(after['turns'])} | {f'{tb:,}' if tb else '—'} | {ta:,} | "
                f"{f'{ta / tb:.4f}' if tb else '—'} |")
    return "\n".join(rows)


def verdict(after: dict[str, Any], before: dict[str, Any] | None) -> str:
    text = after["text_chars"]
    (first, n_msgs), last = after["turns"][0], after["turns"][-1][0]
    # the prompt's text counts as text too
    prompt = len("question 1")
    budget = 1.2 * (text + prompt) + 150 * n_msgs
    lines = [
        f"one turn (prompt + {text:,}-char reply), after: {first:,} B in {n_msgs} comm messages "
        f"= {first / text:.3f}× the reply's text; budget 1.2 × text + 150 B per message = "
        f"{budget:,.0f} B: {'within' if first <= budget else 'OVER'} "
        f"(overhead {first - text - prompt:,} B = {(first - text - prompt) / n_msgs:.0f} B per "
        "message: the comm envelope, the update's keys, the metas and their figures)",
        f"turn {len(after['turns'])} vs turn 1, after: {last / first:.3f} "
        f"({'within' if abs(last / first - 1) <= 0.10 else 'NOT within'} 10%)",
    ]
    if before:
        b1, bn = before["turns"][0][0], before["turns"][-1][0]
        lines.append(f"before: turn 1 {b1:,} B = {b1 / text:.2f}× text; turn "
                     f"{len(before['turns'])} {bn:,} B = {bn / b1:.0f}× turn 1")
    lines.append(f"every reply's text complete: before {before['texts_ok'] if before else '—'}, "
                 f"after {after['texts_ok']}")
    return "\n".join(lines)


def attachment_verdict(after: dict[str, Any], at: int) -> str:
    """What the turn with an image cost, and whether anything of it came again."""
    binary = after["buffer_bytes"]
    sizes = [b for b, _ in after["turns"]]
    later = [b for k, b in enumerate(binary, start=1) if k != at and b]
    before = [s for k, s in enumerate(sizes, start=1) if k < at] or sizes[:1]
    rest = [s for k, s in enumerate(sizes, start=1) if k > at]
    lines = [
        f"turn {at} (an image of {after['image_bytes']:,} B attached): {sizes[at - 1]:,} B, of "
        f"which {binary[at - 1]:,} B of buffers (its preview: {after['preview_bytes']:,} B, "
        "sent once as a binary buffer; the image itself stays in the kernel)",
        f"buffer bytes in the other {len(sizes) - 1} turns: {sum(later):,} "
        f"({'none: sent once' if not later else 'SENT AGAIN'})",
    ]
    if rest:
        ratio = (sum(rest) / len(rest)) / (sum(before) / len(before))
        lines.append(f"turns after {at} / turns before: {ratio:.3f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--chars", type=int, default=2000, help="characters of each reply")
    ap.add_argument("--rate", type=float, default=4000.0,
                    help="pieces (words) per second of the scripted reply")
    ap.add_argument("--at", default="1,10,50,100,200", help="turns to print")
    ap.add_argument("--before-ref", default=BEFORE_REF,
                    help="git ref of the previous way ('' to skip it)")
    ap.add_argument("--json", type=Path, help="write every turn's figures here")
    ap.add_argument("--attach-at", type=int, default=0,
                    help="ask this turn with an image attached (0: none)")
    ap.add_argument("--tools", action="store_true",
                    help="each turn calls a tool first (this tree only: --before-ref '')")
    args = ap.parse_args(argv)
    at = [int(x) for x in args.at.split(",") if x]

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    before = None
    with tempfile.TemporaryDirectory() as tmp:
        if args.before_ref:
            progress(f"before ({args.before_ref}): {args.turns} turns")
            before = measure(str(before_tree(args.before_ref, Path(tmp))), args.turns,
                             args.chars, args.rate, progress)
    progress(f"after (this tree): {args.turns} turns")
    after = measure(str(ROOT), args.turns, args.chars, args.rate, progress,
                    attach_at=args.attach_at, tools=args.tools)
    print(f"Turn bytes: a chat of {args.turns} turns, each a {after['text_chars']:,}-char "
          f"reply (ScriptedSource, {args.rate:g} words/s), bytes of the widget's comm "
          "messages on IOPub per turn\n")
    print(table(before, after, at))
    print()
    print(verdict(after, before))
    if args.attach_at:
        print(attachment_verdict(after, args.attach_at))
    if args.json:
        args.json.write_text(json.dumps({"before": before, "after": after}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
