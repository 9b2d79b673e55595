"""Scenario files: every built-in loads; a broken one is named and the rest still load."""

from __future__ import annotations

import pytest

from gpuplay.core.catalogue.scenarios import ScenarioError, builtin_dir, load_scenarios, parse_scenario

GOOD = """
name = "mine"
workload = "matmul"
[params]
n = 128
[presets.quick]
n = 64
"""


def test_all_builtin_scenarios_load_with_quick_and_published_presets():
    sset = load_scenarios()
    assert not sset.errors
    assert len(sset.scenarios) == 22
    for sc in sset.scenarios.values():
        assert {"quick", "published"} <= set(sc.presets), sc.name
        sc.preset_params("quick")
        sc.preset_params("published")
    assert sset.get("fft2d").claim.speedup == 1714
    assert sset.get("matmul").preset_params("published") == {"n": 4096}
    assert sset.get("batched_matmul").preset_params("published") == {"batch": 1024, "n": 256}


@pytest.mark.parametrize(
    "text, field",
    [
        ("name = 'x'\n", "workload"),
        ("name = 'x'\nworkload = 'warp'\n", "workload"),
        ("name = 'x'\nworkload = 'matmul'\n[params]\nn = -3\n", "params"),
        ("name = 'x'\nworkload = 'matmul'\n[presets.quick]\nn = 'big'\n", "presets.quick"),
        ("name = 'x'\nworkload = 'matmul'\n[params]\nbogus = 1\n", "params"),
        ("name = 'x y'\nworkload = 'matmul'\n", "name"),
        ("name = 'x'\nworkload = 'matmul'\nexec = 'import os'\n", "exec"),
        ("name = 'x'\nworkload = 'matmul'\n[claim]\ntext = 'a'\n", "claim.source"),
        ("name = 'x'\nworkload = 'matmul'\n[claim]\nsource='s'\ntext='t'\nspeedup = -1\n", "claim.speedup"),
        ("this is not toml", ""),
    ],
)
def test_bad_scenario_names_file_and_field(text, field):
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, "bad.toml")
    assert info.value.field == field
    assert str(info.value).startswith("bad.toml")


def test_a_broken_file_does_not_stop_the_others(tmp_path):
    (tmp_path / "mine.toml").write_text(GOOD)
    (tmp_path / "broken.toml").write_text("name = 'b'\nworkload = 'matmul'\n[params]\nn = 0\n")
    (tmp_path / "binary.toml").write_bytes(b"\xff\xfe\x00garbage")
    sset = load_scenarios([tmp_path])
    assert "mine" in sset.scenarios and "matmul" in sset.scenarios
    names = {e.path.name for e in sset.errors}
    assert names == {"broken.toml", "binary.toml"}
    broken = next(e for e in sset.errors if e.path.name == "broken.toml")
    assert broken.field == "params" and "n must be >= 2" in broken.detail


def test_user_folder_can_override_a_builtin(tmp_path):
    (tmp_path / "m.toml").write_text(GOOD.replace('"mine"', '"matmul"'))
    assert load_scenarios([tmp_path]).get("matmul").preset_params("quick") == {"n": 64}


def test_missing_folder_is_reported():
    sset = load_scenarios(["/nonexistent/gpuplay"])
    assert any("not found" in e.detail for e in sset.errors)
    assert sset.scenarios  # built-ins still there


def test_loading_never_executes_code(tmp_path):
    marker = tmp_path / "executed"
    (tmp_path / "evil.toml").write_text(
        f"name = \"__import__('os').system('touch {marker}')\"\nworkload = \"matmul\"\n"
    )
    load_scenarios([tmp_path])
    assert not marker.exists()


def test_builtin_dir_is_found():
    assert (builtin_dir() / "matmul.toml").is_file()
