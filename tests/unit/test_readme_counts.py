"""The README's counts are what gpuplay ships: every "N computations", "N scenarios", "N demo
decks" and "N examples" it writes agrees with `gpuplay list --format json`, the decks folder and
the examples folder, so a scenario or deck added without the README following fails here."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuplay.cli import main

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

NUMBER_WORDS = {
    w: i
    for i, w in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
            "twenty",
        ]
    )
}
# "19 computations", "22 scenarios", "four demo decks", "5 examples": a number, then what it counts.
COUNT = re.compile(
    r"\b(\d+|" + "|".join(NUMBER_WORDS) + r")\s+(computations|scenarios|demo decks|examples)\b",
    re.IGNORECASE,
)


def readme_counts(text: str) -> list[tuple[str, int, str]]:
    """Every count the text writes: (what, the number, the words as written)."""
    found = []
    for m in COUNT.finditer(text):
        raw, what = m.group(1), m.group(2).lower()
        n = int(raw) if raw.isdigit() else NUMBER_WORDS[raw.lower()]
        found.append((what, n, m.group(0)))
    return found


@pytest.fixture
def shipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """What gpuplay ships, read the way a user reads it (`gpuplay list --format json`), with a
    config folder of its own so no user's extra scenario folders count."""
    monkeypatch.setenv("GPUPLAY_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("GPUPLAY_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    result = CliRunner().invoke(main, ["list", "--format", "json"])
    assert result.exit_code == 0, result.output
    scenarios = json.loads(result.output)
    return {
        "scenarios": len(scenarios),
        "computations": len({s["workload"] for s in scenarios}),
        "demo decks": len(list((ROOT / "scenarios" / "decks").glob("*.toml"))),
        "examples": len(list((ROOT / "examples").glob("*.py"))),
    }


def test_every_count_the_readme_writes_is_what_gpuplay_ships(shipped: dict[str, int]) -> None:
    counts = readme_counts(README.read_text(encoding="utf-8"))
    written = {what for what, _, _ in counts}
    # The front door says how many computations, scenarios and demo decks there are.
    assert {"computations", "scenarios", "demo decks"} <= written, counts
    wrong = [
        f"README says {words!r}; gpuplay ships {shipped[what]}"
        for what, n, words in counts
        if n != shipped[what]
    ]
    assert not wrong, "\n".join(wrong)


def test_the_scenarios_folder_and_the_listing_agree(shipped: dict[str, int]) -> None:
    # The README counts what `gpuplay list` shows; the wheel ships the folder: one figure for both.
    assert shipped["scenarios"] == len(list((ROOT / "scenarios").glob("*.toml")))


def test_the_counts_are_read_as_written() -> None:
    assert readme_counts("19 computations in 22 scenarios, four demo decks and 5 examples") == [
        ("computations", 19, "19 computations"),
        ("scenarios", 22, "22 scenarios"),
        ("demo decks", 4, "four demo decks"),
        ("examples", 5, "5 examples"),
    ]
