"""``trainer export RUN --out DIR``: a run's weights in the model's safetensors format.

The EMA weights (paper §5: what is validated) of the run's newest checkpoint, or of ``--step
N``, are loaded into a ``PUICLModel`` built from the model config stored in the checkpoint and
written with ``puicl_model.net.weights.save_weights``, so that ``PUICLClassifier(weights=DIR)``
loads them.

Unlike auto-resume, export never falls back to an older checkpoint on its own: weights from
an older step than the user believes are a silent wrong answer. A damaged newest checkpoint
is an error that names the file and the ``--step`` that exports an older one on purpose.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from puicl_common.configio import ConfigError, from_mapping
from puicl_common.output_paths import write_failed
from puicl_model.net.config import ModelConfig
from trainer.checkpoint import CheckpointError, CheckpointStore, checkpoint_name


def load_run_checkpoint(run_dir: str | Path, step: int | None = None) -> tuple[Path, dict]:
    """The newest checkpoint of a run, or the one of ``step``; an error if it does not verify."""
    run_dir = Path(run_dir)
    directory = run_dir / "checkpoints"
    if not directory.is_dir():
        raise CheckpointError(
            f"{run_dir} has no checkpoints/ directory: is it a run directory of "
            "trainer/main.py, and has the run reached its first checkpoint?"
        )
    store = CheckpointStore(directory)
    if step is not None:
        path = directory / checkpoint_name(step)
        available = [e["step"] for e in store.entries()]
        if not path.exists():
            raise CheckpointError(
                f"{run_dir} has no checkpoint of step {step}; available steps: {available}"
            )
        return path, store.load(path)
    entries = store.entries()
    if not entries:
        raise CheckpointError(f"{run_dir} has no checkpoint yet")
    newest = directory / entries[-1]["file"]
    try:
        return newest, store.load(newest)
    except CheckpointError as err:
        older = _readable_steps(store, entries[:-1])
        hint = (
            f"to export an older checkpoint on purpose pass --step N (readable: {older})"
            if older
            else "no older checkpoint of this run can be read either"
        )
        raise CheckpointError(f"the newest checkpoint cannot be exported: {err}; {hint}") from None


def _readable_steps(store: CheckpointStore, entries: list[dict[str, Any]]) -> list[int]:
    """The steps of ``entries`` whose checkpoint verifies and loads, newest first."""
    readable = []
    for entry in reversed(entries):
        try:
            store.load(store.directory / entry["file"])
        except CheckpointError:
            continue
        readable.append(entry["step"])
    return readable


def ema_model_from_checkpoint(payload: dict[str, Any], source: str | Path = "the checkpoint"):
    """A ``PUICLModel`` (eval mode, CPU) holding the checkpoint's EMA weights.

    The stored config is checked before a model is built, as ``load_weights`` checks a weights
    file: its sizes against the limits puicl loads, and the shapes a model of it has (computed
    on the meta device) against the EMA tensors the checkpoint holds, so a config that claims
    a larger model than the checkpoint carries allocates nothing. ``source`` names the file in
    the errors."""
    from puicl_model.net.model import PUICLModel
    from puicl_model.net.weights import check_config_against_tensors

    model_section = _stored_config(payload, source).get("model")
    ema = payload.get("ema")
    if not isinstance(model_section, dict) or ema is None:
        raise CheckpointError(f"{source} holds no model config or EMA weights where a "
                              "checkpoint keeps them ('config' -> 'model', 'ema')")
    try:
        config = from_mapping(ModelConfig, model_section, "model")
    except ConfigError as err:
        raise CheckpointError(f"{source}: its stored model config is not valid ({err})") \
            from None
    if not isinstance(ema, dict) or not all(isinstance(v, torch.Tensor) for v in ema.values()):
        raise CheckpointError(f"{source}: its EMA weights are not a mapping of tensors")
    try:
        check_config_against_tensors(config, {name: tuple(v.shape) for name, v in ema.items()},
                                     Path(source))
    except ValueError as err:
        raise CheckpointError(str(err)) from None
    _check_finite(ema, source)
    model = PUICLModel(config)
    model.load_state_dict(ema, strict=True)
    return model.eval()


def _stored_config(payload: dict[str, Any], source: str | Path) -> dict[str, Any]:
    """The run config a checkpoint stores (plain data), or a CheckpointError naming
    ``source``: a checkpoint passes its checksum whatever it holds, if written whole."""
    config = payload.get("config")
    if not isinstance(config, dict):
        shown = "no 'config'" if config is None else f"a {type(config).__name__} as its config"
        raise CheckpointError(f"{source} holds {shown}, where a checkpoint keeps the run's "
                              "config as a mapping; it was not written by this trainer")
    return config


def _check_finite(tensors: dict[str, torch.Tensor], source: str | Path) -> None:
    """Refuse weights holding NaN, an infinity or a magnitude no trained model reaches:
    exported, they would score every row NaN (a run whose EMA diverged, or a damaged file
    whose checksum was recomputed); the loader refuses them by the same rule."""
    from puicl_model.net.weights import damaged_tensors

    damaged = damaged_tensors(tensors)
    if damaged:
        raise CheckpointError(f"{source}: the EMA weights hold {damaged}; they cannot be "
                              "exported: export an earlier checkpoint with --step N")


def exported_model(run_dir: str | Path, step: int | None = None) -> tuple[Any, str]:
    """The model ``trainer export`` writes, and a line saying which weights it holds."""
    path, payload = load_run_checkpoint(run_dir, step)
    # a run that asked for checkpoint averaging (since removed) must not be handed its EMA
    # weights instead without a word
    training = _stored_config(payload, path).get("training", {})
    average = training.get("average", "ema") if isinstance(training, dict) else "ema"
    if average != "ema":
        raise CheckpointError(
            f"{path} was trained with training.average: {average}, which was removed "
            "(docs/recipe.md); this trainer exports EMA weights only"
        )
    return ema_model_from_checkpoint(payload, path), f"the EMA weights of {path}"


def export_run(run_dir: str | Path, out: str | Path, step: int | None = None) -> str:
    """Write a run's exported weights to ``out``; returns which weights (for the user)."""
    from puicl_model.net.weights import save_weights

    model, description = exported_model(run_dir, step)
    try:
        save_weights(model, out)
    except OSError as err:  # a read-only place, a full disk
        raise write_failed(out, err) from None
    return description
