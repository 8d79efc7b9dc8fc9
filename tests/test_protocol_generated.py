"""The front end's protocol types are generated from nbstream/widgets/protocol.py
(scripts/gen_protocol.py): the committed js/src/protocol.gen.ts must be what the
generator writes now, and declare every type and constant protocol.py names.
(`make lint` runs the same check; this one runs in `make test`, which CI runs.)"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

import gen_protocol  # noqa: E402

from nbstream.widgets import protocol  # noqa: E402

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not (REPO / "js" / "node_modules").is_dir(),
    reason="needs node and js/node_modules (npm ci in js/)")


@pytest.fixture(scope="module")
def generated() -> str:
    return gen_protocol.typescript()


def test_the_committed_file_is_what_the_generator_writes(generated: str) -> None:
    committed = gen_protocol.OUT.read_text(encoding="utf-8")
    assert committed == generated, (
        "js/src/protocol.gen.ts is stale: run `python scripts/gen_protocol.py`")


def test_every_declared_type_and_constant_is_generated(generated: str) -> None:
    declared = set(re.findall(r"^export (?:type|interface|const) (\w+)", generated, re.M))
    names = {id(v): k for k, v in vars(protocol).items()}
    types = {names[id(t)] for t in protocol.GENERATED}
    assert types | set(protocol.GENERATED_CONSTANTS) == declared
    # the fields of a message, with their doc comments, in the order written
    ack = re.search(r"export interface AckMsg \{(.*?)\n\}", generated, re.S)
    assert ack is not None
    assert re.findall(r"^  (\w+)\??:", ack.group(1), re.M) == ["kind", "id", "seq", "render_ms"]
    assert "the mean DOM time of the view's frames since its last ack" in ack.group(1)
    assert "render_ms?: number" in ack.group(1)  # NotRequired: optional
    # a round of acks: a list of entries, its bounds said in the doc comment and typed
    acks = re.search(r"export interface AcksMsg \{(.*?)\n\}", generated, re.S)
    assert acks is not None
    assert "acks: [AckEntry, ...AckEntry[]];" in acks.group(1)  # at least one
    assert f"@maxItems {protocol.MAX_ACKS}" in acks.group(1)
    assert f"export const MAX_ACKS = {protocol.MAX_ACKS};" in generated
    # an alias is named where it is used, not spelled out again
    assert re.search(r"^  status: Status;", generated, re.M)
