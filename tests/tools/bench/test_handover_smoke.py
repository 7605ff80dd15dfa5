"""Benchmarks are not tests: this only checks that the hand-over benchmark (tools/bench/handover.py) runs on tiny
input, that both of its processes handled every heartbeat of every batch size, and that its JSON has every figure.
No timing is asserted."""

from __future__ import annotations

import pytest

from tests.tools.bench.conftest import RunBench
from tools.bench import handover


def test_handover_benchmark_runs_on_tiny_input(run_bench: RunBench) -> None:
    proc, report = run_bench("handover", "--quick", "--batches", "1,7", timeout=120)
    assert report["settings"] == {"count": 2000, "batches": [1, 7], "reps": 1}
    assert [r["batch"] for r in report["rows"]] == [1, 7]
    for r in report["rows"]:
        for side in ("front_us", "core_us", "both_us"):
            assert r[side]["median"] >= 0 and r[side]["range"][0] <= r[side]["median"] <= r[side]["range"][1], r
    assert report["moved_us"]["median"] > 0  # frames were decoded and answers framed
    assert "moved off the Raft process" in proc.stdout and "batch of 7" in proc.stdout


def test_every_frame_of_the_stream_is_a_heartbeat_item() -> None:
    # 130 frames: two full reads of READ frames and a partial one, each decoded into its 1202 item
    assert handover.READ == 64 and len(handover.stream(130)) == 3
    assert handover.moved_us(130) > 0


def test_a_batch_that_does_not_divide_the_count_is_handed_over_whole() -> None:
    front, core = handover.handover_us(101, 25)  # the core process checks it served all 101
    assert front > 0 and core >= 0


@pytest.mark.parametrize("argv", [["--count", "0"], ["--batches", "0,5"], ["--reps", "0"], ["--batches", ","]])
def test_bad_arguments_name_the_option(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        handover.parse(argv)
    assert e.value.code == 2 and "--" in capsys.readouterr().err
