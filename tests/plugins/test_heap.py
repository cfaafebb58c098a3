"""dgb_airflow.heap: a forked child that froze its inherited heap keeps sharing its parent's pages
through a full collection; without the freeze the collection copies them."""

from __future__ import annotations

from tests.support.processes import run_python

CHILD_DIRTY = r"""
import gc, os, sys
from dgb_airflow.heap import freeze_inherited_heap

def private_dirty_kib():
    for line in open("/proc/self/smaps_rollup"):
        if line.startswith("Private_Dirty:"):
            return int(line.split()[1])

keep = [[i] for i in range(400_000)]  # ~40 MiB of tracked objects in the parent
gc.collect()
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    froze = freeze_inherited_heap() if sys.argv[1] == "freeze" else False
    before = private_dirty_kib()
    gc.collect()  # the full collection a child's imports set off
    os.write(w, f"{int(froze)} {private_dirty_kib() - before}".encode())
    os._exit(0)
os.waitpid(pid, 0)
froze, grown = os.read(r, 100).decode().split()
print(froze, grown)
"""


def _child(mode: str) -> tuple[bool, int]:
    froze, grown = run_python(CHILD_DIRTY, mode).split()
    return froze == "1", int(grown)


def test_a_frozen_child_keeps_the_parents_pages_through_a_full_collection():
    froze, grown_frozen = _child("freeze")
    thawed, grown_thawed = _child("plain")
    assert froze and not thawed
    assert grown_thawed > 20 * 1024, grown_thawed  # the collection copied the inherited lists' pages
    assert grown_frozen < grown_thawed / 4, (grown_frozen, grown_thawed)


ONCE = r"""
import os
from dgb_airflow import heap
first, again = heap.freeze_inherited_heap(), heap.freeze_inherited_heap()
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.write(w, b"1" if heap.freeze_inherited_heap() else b"0")
    os._exit(0)
os.waitpid(pid, 0)
print(first, again, os.read(r, 1) == b"1")
"""


def test_it_freezes_once_per_process_and_again_in_a_forked_child():
    assert run_python(ONCE) == "True False True"


def test_the_triggerer_runner_freezes_when_it_loads_the_pubsub_trigger():
    code = "import gc; import dgb_airflow.triggers.pubsub; print(gc.get_freeze_count() > 0)"
    assert run_python(code) == "True"
