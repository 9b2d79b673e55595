"""A deck's sweep step: the shipped deck validates, and a bad sweep table names its field."""

from __future__ import annotations

import pytest

from gpuplay.core.catalogue.scenarios import load_scenarios
from gpuplay.core.reports.decks import DeckError, load_deck, needed_specs, parse_deck, resolve_deck_path

STEP = """
title = "t"
[[steps]]
title = "numpy"
scenario = "matmul"
caption = "one figure"
[[steps]]
title = "sweep"
scenario = "matmul"
caption = "every size"
[steps.sweep]
{body}
"""


@pytest.fixture(scope="module")
def scenarios():
    return load_scenarios([])


def test_shipped_deck_has_sweep_steps_that_validate(scenarios):
    deck = load_deck(resolve_deck_path("gpu-pays-off"), scenarios)
    sweeps = [s.sweep for s in deck.steps if s.sweep is not None]
    assert len(sweeps) == 3
    assert sweeps[0].param == "n" and sweeps[0].values == (32, 64, 128, 256, 512, 1024)
    assert sweeps[0].devices == ("cpu", "cuda") and sweeps[0].transfers == "both"
    assert sweeps[2].dtypes == ("float32", "float64")
    # rehearsals record single figures: a sweep step adds none
    assert needed_specs(deck) == needed_specs(deck.__class__(deck.title, "", deck.steps[:1]))


def test_a_sweep_step_parses_with_defaults(scenarios):
    deck = parse_deck(STEP.format(body='over = "n=16..64"'), scenarios)
    s = deck.steps[1].sweep
    assert s.values == (16, 32, 64) and s.backends == ("numpy", "torch") and s.budget_s == 0.2
    assert deck.steps[0].sweep is None


@pytest.mark.parametrize(
    "body, words",
    [
        ("", "over: missing"),
        ('over = "m=16..64"', "over: matmul has no parameter 'm'"),
        ('over = "n=64..16"', "must not be below its start"),
        ('over = "n=1,4"', "n must be >= 2"),
        ('over = "n=16,32"\nbackends = ["jax"]', "backends: unknown jax"),
        ('over = "n=16,32"\nbackends = "numpy"', "backends: must be a non-empty list"),
        ('over = "n=16,32"\ndtypes = ["float128"]', "dtypes: unknown float128"),
        ('over = "n=16,32"\ntransfers = "yes"', "transfers: must be one of"),
        ('over = "n=16,32"\nbudget_s = -1', "budget_s: must be a number"),
        ('over = "n=16,32"\nbudget_s = nan', "budget_s: must be a number"),
        ('over = "n=16,32"\nsizes = 3', "sizes: unknown field"),
    ],
)
def test_a_bad_sweep_table_names_the_step_and_field(scenarios, body, words):
    with pytest.raises(DeckError, match="step 2: sweep") as exc:
        parse_deck(STEP.format(body=body), scenarios, "d.toml")
    assert words in str(exc.value)
