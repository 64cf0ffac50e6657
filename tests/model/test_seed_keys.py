"""The spawn keys of the classifier's draws are written once (puicl_model.passes.seed_keys) and
no two draws can produce the same key."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import numpy as np

from puicl_model.passes import seed_keys

PACKAGE = Path(__file__).resolve().parents[2] / "puicl_model"


def _may_equal(first: tuple[int | str, ...], second: tuple[int | str, ...]) -> bool:
    """Whether some key fits both shapes: a str word is any value, a last "..." any further
    words."""
    open_first, open_second = first[-1:] == ("...",), second[-1:] == ("...",)
    first, second = first[:len(first) - open_first], second[:len(second) - open_second]
    if (len(first) < len(second) and not open_first) or (
            len(second) < len(first) and not open_second):
        return False
    return all(isinstance(a, str) or isinstance(b, str) or a == b
               for a, b in zip(first, second, strict=False))


def test_every_tag_is_in_the_table():
    names = {name for name in seed_keys.__all__ if name != "KEY_SHAPES"}
    assert set(seed_keys.KEY_SHAPES) == names
    for name, shapes in seed_keys.KEY_SHAPES.items():
        assert all(shape[0] == getattr(seed_keys, name) for shape in shapes), name


def test_no_two_draws_share_a_key():
    shapes = [(name, shape) for name, group in seed_keys.KEY_SHAPES.items() for shape in group]
    for (name_a, a), (name_b, b) in itertools.combinations(shapes, 2):
        assert not _may_equal(a, b), f"{name_a} {a} and {name_b} {b} can draw the same key"
    # the one shared tag: its keys differ in length, and so does the state they seed
    assert seed_keys.BOOTSTRAP == seed_keys.HELD_OUT
    states = {tuple(np.random.SeedSequence(7, spawn_key=key).generate_state(4))
              for key in [(12,), (12, 0), (12, 1, 2, 0), (12, 1, 2, 1)]}
    assert len(states) == 4


def test_the_values_stored_scores_were_drawn_with():
    # changing a value changes every stored score: a new draw takes a new tag instead
    assert {name: getattr(seed_keys, name) for name in seed_keys.KEY_SHAPES} == {
        "FEATURES": 1, "POOL": 2, "LABELED": 3, "MEMBER": 4, "FEATURE_SUBSET": 5,
        "PRIOR_FOLDS": 11, "BOOTSTRAP": 12, "HELD_OUT": 12, "LOGISTIC_FOLDS": 13,
        "POOL_SAMPLE": 14, "BOOSTED_FOLDS": 15, "JUDGED": 16, "BAGS": 17, "CONTEXT": 6,
        "RANKING": 18, "PRIOR_POOL": 19,
    }


def test_no_spawn_key_is_written_as_a_number():
    """Every ``spawn_key=`` in puicl_model names its tag from the table, never a literal."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not isinstance(node, ast.keyword) or node.arg != "spawn_key":
                continue
            value = node.value
            first = value.elts[0] if isinstance(value, ast.Tuple) and value.elts else value
            if isinstance(first, ast.Constant):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not found, f"spawn_key with a literal tag (use puicl_model.passes.seed_keys): {found}"
