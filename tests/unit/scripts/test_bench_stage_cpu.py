"""scripts/bench_stage_cpu.py: every part it names is timed while the stages run, the embed
stage's commit apart from enrich's, the stand-in model's CPU out of both stages' figures, and every
function it wrapped is put back."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "scripts"))

import bench_stage_cpu  # noqa: E402

from dgb_dev import stagework  # noqa: E402


def wrapped_functions() -> dict[tuple[str, str], object]:
    out = {}
    for _part, owner, attribute in bench_stage_cpu.PARTS:
        module, _, cls = owner.partition(":")
        target = importlib.import_module(module)
        out[owner, attribute] = (getattr(target, cls) if cls else target).__dict__[attribute]
    return out


def test_every_part_is_timed_and_every_wrapped_function_put_back():
    before = wrapped_functions()
    spent = bench_stage_cpu.measure(stagework.load_rows(n=30))
    for part, _owner, _attribute in bench_stage_cpu.PARTS:
        assert spent[part] > 0, part
    assert spent["embed.commit"] > 0 and spent["model (stand-in, not counted)"] > 0
    inner = sum(v for k, v in spent.items() if k.startswith("enrich."))
    assert abs(spent["enrich"] - inner) < 1e-9  # the parts and "other" add up to the stage
    assert wrapped_functions() == before
