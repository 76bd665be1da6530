"""Who gets freed room first (issue 45): orders that waited long are placed oldest first, and the oldest that
finds no room keeps the device closest to holding it, so a stream of smaller orders cannot starve it. The
planner runs here with `--fifo-after 5` (60 s as shipped) so the test need not wait a minute; a refusal under
a class narrower than the fleet names what it leaves out."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from isvc_testbed.module import ModuleProcesses
from isvc_testbed.orders import Orders, assert_refused, hf
from kubernetes import client as k8s

pytestmark = pytest.mark.e2e

GPU = "gpu.nvidia.com"
QWEN = "Qwen/Qwen2.5-7B-Instruct"  # 77 % of an L4 as a chat order
BGE = "BAAI/bge-m3"  # 19 % of an L4 as an embeddings order
L4_ONLY = f"device.attributes['{GPU}'].productName == 'NVIDIA L4'"
H100_ONLY = f"device.attributes['{GPU}'].productName == 'NVIDIA H100 80GB HBM3'"
FIFO_AFTER = 5.0


class Bed(Orders):
    def klass(
        self, name: str, selector: str, *, shares: list[int] | None = None, embeddings: bool = False
    ) -> str:
        accel: dict[str, Any] = {"deviceClassNames": [GPU], "selector": selector}
        if shares:
            accel["allowedSharePercents"] = shares
        spec = {
            "modelPolicy": {"allowedEndpointTypes": ["Embeddings" if embeddings else "Chat"]},
            "exposure": {"type": "ClusterLocal", "authentication": "Token"},
            "acceleratorPolicy": accel,
        }
        self.create_class(name, spec)
        return name


@pytest.fixture(scope="module")
def fifo_planner(module: ModuleProcesses) -> Iterator[ModuleProcesses]:
    """The planner started again with `--fifo-after 5`, and as it was after the file."""
    before = module.planner_args
    module.planner_args = (*before, "--fifo-after", str(FIFO_AFTER))
    module.stop_planner()
    module.start_planner()
    try:
        yield module
    finally:
        module.planner_args = before
        module.stop_planner()
        module.start_planner()


@pytest.fixture
def bed(
    fifo_planner: ModuleProcesses, admin_api: k8s.ApiClient, alice_api: k8s.ApiClient, team_a: str
) -> Iterator[Bed]:
    with Bed(fifo_planner, admin_api, alice_api, team_a) as b:
        yield b


def test_room_freed_for_both_goes_first_to_the_chat_that_waited_longest_issue_45(bed: Bed) -> None:
    """One L4 frees up while a chat order (77 %) has waited long and four embeddings orders (19 % each)
    wait too: packed for the most orders, the four embeddings would take the card; the chat waited longest,
    so it is placed first and one embeddings order beside it."""
    whole = bed.klass("fifo-l4-whole", L4_ONLY, shares=[100])
    chat = bed.klass("fifo-l4-chat", L4_ONLY)
    embed = bed.klass("fifo-l4-embed", L4_ONLY, embeddings=True)
    blockers = [bed.create(f"fifo-hold-{i}", hf(QWEN), whole) for i in (1, 2)]
    for name in blockers:
        bed.wait_ready(name)
    first = bed.create("fifo-chat", hf(QWEN), chat)
    bed.wait_reason(first, "Planned", "NoCapacity")
    time.sleep(FIFO_AFTER + 1)
    later = [bed.create(f"fifo-emb-{i}", hf(BGE), embed) for i in range(4)]
    for name in later:
        bed.wait_reason(name, "Planned", "NoCapacity")
    bed.delete(blockers[0])
    status = bed.wait_ready(first, 120)
    assert status["resolved"]["acceleratorProductName"] == "NVIDIA L4"
    placed = [n for n in later if bed.plan(n) is not None]
    assert len(placed) <= 1, placed  # the one that fits beside the chat, at most


def test_the_oldest_keeps_the_device_closest_to_holding_it_against_a_stream_of_small_ones_issue_45(
    bed: Bed,
) -> None:
    """One L4 is half held, the other whole: the chat (77 %) waits long, then keeps the half-free card;
    embeddings orders that would fit there wait instead of taking it, and when its holder goes, the chat is
    placed there. Without the keep, they would take the free half, and the chat never fit."""
    half = bed.klass("keep-l4-half", L4_ONLY, shares=[50], embeddings=True)
    whole = bed.klass("keep-l4-whole", L4_ONLY, shares=[100])
    h100 = bed.klass("keep-h100", H100_ONLY)
    chat = bed.klass("keep-l4-chat", L4_ONLY)
    embed = bed.klass("keep-l4-embed", L4_ONLY, embeddings=True)
    qwen = hf(QWEN)
    holder = bed.create("keep-half", hf(BGE), half)
    bed.wait_ready(holder)
    bed.wait_ready(bed.create("keep-whole", qwen, whole))
    elsewhere = bed.create("keep-elsewhere", qwen, h100)
    bed.wait_ready(elsewhere)
    oldest = bed.create("keep-chat", qwen, chat)
    bed.wait_reason(oldest, "Planned", "NoCapacity")
    time.sleep(FIFO_AFTER + 1)
    bed.delete(elsewhere)  # room appears elsewhere: the waiting room's pass finds the chat due, and it keeps
    time.sleep(3)
    small = [bed.create(f"keep-emb-{i}", hf(BGE), embed) for i in range(2)]
    for name in small:
        status = bed.wait_reason(name, "Planned", "NoCapacity")  # they would fit in the free half
    bed.delete(holder)
    assert bed.wait_ready(oldest, 120)["resolved"]["acceleratorProductName"] == "NVIDIA L4"
    assert_refused(status, "Planned", "NoCapacity")


def test_no_capacity_under_a_class_narrower_than_the_fleet_names_what_it_leaves_out_issue_45(
    bed: Bed,
) -> None:
    """Both L4s are taken whole; the class admits L4s only, and H100s have room: the refusal says the class's
    selector leaves them out (it said no device had room)."""
    whole = bed.klass("narrow-l4-whole", L4_ONLY, shares=[100])
    qwen = hf(QWEN)
    for i in (1, 2):
        bed.wait_ready(bed.create(f"narrow-hold-{i}", qwen, whole))
    third = bed.create("narrow-third", qwen, whole)
    status = bed.wait_reason(third, "Planned", "NoCapacity")
    assert_refused(
        status, "Planned", "NoCapacity", "the class's accelerator selector", "NVIDIA H100 80GB HBM3"
    )
