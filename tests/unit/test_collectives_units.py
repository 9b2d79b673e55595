"""Message sizes, nccl-tests' bandwidth factors, element counts and the rank's environment."""

from __future__ import annotations

import pytest

from gpuplay.collectives.bandwidth import OPS, algbw, bus_factor, busbw
from gpuplay.collectives.bench import RankEnv, RankError, _first_sentence
from gpuplay.collectives.ops import element_count
from gpuplay.collectives.sizes import SizeError, format_size, parse_size, parse_sizes


@pytest.mark.parametrize(
    "text,expected",
    [("1K", 1024), ("1k", 1024), ("16M", 16 << 20), ("1G", 1 << 30), ("512", 512), ("4KiB", 4096),
     ("2MB", 2 << 20), (" 1.5K ", 1536)],
)  # fmt: skip
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["", "K", "1Q", "-1K", "0", "1.3", "1T", "abc"])
def test_parse_size_rejects(bad):
    with pytest.raises(SizeError):
        parse_size(bad)


def test_parse_sizes_list_and_range():
    assert parse_sizes("1K,1M,16M") == [1024, 1 << 20, 16 << 20]
    assert parse_sizes("16M,1K,1K") == [1024, 16 << 20]  # sorted, no duplicates
    assert parse_sizes("1K:8K") == [1024, 2048, 4096, 8192]
    assert parse_sizes("1K:64M")[-1] == 64 << 20 and len(parse_sizes("1K:64M")) == 17
    assert parse_sizes("1K:3K,1M") == [1024, 2048, 1 << 20]  # a range stops at its upper bound
    with pytest.raises(SizeError, match="smaller size to the larger"):
        parse_sizes("64M:1K")
    with pytest.raises(SizeError, match="no sizes"):
        parse_sizes(" , ")


def test_format_size_round_trips():
    for s in ["1K", "16M", "1G", "512", "3K"]:
        assert format_size(parse_size(s)) == s
    assert format_size(1000) == "1000"
    assert format_size(1536) == "1.5K"


def test_bus_factors_are_nccl_tests():
    # doc/PERFORMANCE.md of nccl-tests: AllReduce 2(n-1)/n, ReduceScatter/AllGather/AlltoAll (n-1)/n, Broadcast 1
    assert bus_factor("all_reduce", 2) == 1.0
    assert bus_factor("all_reduce", 8) == pytest.approx(1.75)
    assert bus_factor("all_gather", 4) == pytest.approx(0.75)
    assert bus_factor("reduce_scatter", 8) == pytest.approx(0.875)
    assert bus_factor("all_to_all", 2) == pytest.approx(0.5)
    assert bus_factor("broadcast", 8) == 1.0
    for op in OPS:  # one rank moves nothing over a bus, except broadcast's definition of 1
        assert bus_factor(op, 1) == (1.0 if op == "broadcast" else 0.0)
    with pytest.raises(ValueError, match="unknown collective"):
        bus_factor("reduce", 2)
    with pytest.raises(ValueError):
        bus_factor("all_reduce", 0)


def test_algbw_and_busbw():
    # 16 MiB in 36 ms over 2 ranks: algbw 0.466 GB/s, all_reduce busbw the same (factor 1)
    assert algbw(16 << 20, 0.036) == pytest.approx(16 * 2**20 / 0.036)
    assert busbw("all_reduce", 4, 1e9, 1.0) == pytest.approx(1.5e9)
    assert busbw("all_gather", 4, 1e9, 2.0) == pytest.approx(0.375e9)


def test_element_count_rounds_to_world_multiple():
    assert element_count(1024, 2) == 256
    assert element_count(1024, 3) == 255  # nccl-tests rounds counts down to a multiple of n
    assert element_count(4, 8) == 8  # at least one element per rank


def test_rank_env():
    env = RankEnv.from_environ({"RANK": "1", "WORLD_SIZE": "4", "MASTER_ADDR": "node7", "MASTER_PORT": "29500",
                                "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"})  # fmt: skip
    assert (env.rank, env.world_size, env.local_world_size, env.master_addr, env.master_port) == (
        1, 4, 2, "node7", 29500)  # fmt: skip
    alone = RankEnv.from_environ({})
    assert alone.world_size == 1 and alone.master_port > 0  # a world of one picks a free port itself
    with pytest.raises(RankError, match="MASTER_PORT is not set"):
        RankEnv.from_environ({"RANK": "0", "WORLD_SIZE": "2"})
    with pytest.raises(RankError, match="outside WORLD_SIZE"):
        RankEnv.from_environ({"RANK": "2", "WORLD_SIZE": "2", "MASTER_PORT": "1"})


def test_gloo_message_gist():
    raw = ("[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer "
           "[127.0.0.1]:42639. This is typically caused by a remote worker crashing. GLHF!")  # fmt: skip
    assert _first_sentence(raw) == "Connection closed by peer [127.0.0.1]:42639"


def test_series_for_a_bandwidth_plot():
    from gpuplay.collectives.report import series, to_table

    doc = {
        "backend": "gloo", "world_size": 2, "iters": 3, "warmup": 1, "dtype": "float32",
        "results": [
            {"op": "all_reduce", "size_bytes": 2048, "count": 512, "status": "ok", "busbw_gbs": 2.0, "algbw_gbs": 2.0,
             "summary": {"median": 1e-3, "p25": 0.9e-3, "p75": 1.1e-3, "min": 0.8e-3}, "check_ok": True},
            {"op": "all_reduce", "size_bytes": 1024, "count": 256, "status": "ok", "busbw_gbs": 1.0, "algbw_gbs": 1.0,
             "summary": {"median": 1e-3, "p25": 1e-3, "p75": 1e-3, "min": 1e-3}, "check_ok": False, "max_error": 2.0},
            {"op": "broadcast", "size_bytes": 1 << 30, "status": "skipped", "message": "needs ~3G"},
        ],
    }  # fmt: skip
    assert series(doc) == {"all_reduce": [(1024, 1.0), (2048, 2.0)]}
    table = to_table(doc)
    assert "WRONG (max error 2)" in table and "skipped: needs ~3G" in table and "±10.0%" in table
