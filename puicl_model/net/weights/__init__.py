"""Model weights on disk: safetensors + the JSON model config, never a pickle.

Layout (docs/architecture.md §7). A checkpoint is either

* a directory ``DIR/`` holding ``model.safetensors`` and ``config.json`` (what
  :func:`save_weights` writes for a path without the ``.safetensors`` suffix, and what
  ``trainer export RUN --out DIR`` produces), or
* a single ``*.safetensors`` file.

Either way the safetensors header metadata carries everything needed to rebuild the model:
``format`` (``"puicl-weights"``), ``format_version``, ``model_config`` (the JSON of
:class:`~puicl_model.net.config.ModelConfig`), ``tensors_sha256`` (a checksum of the tensor bytes,
verified on load) and ``puicl_version``. ``config.json`` duplicates ``model_config`` so that a
person can read it; when both exist they must agree.

This directory is also where the bundled default checkpoint ships
(``puicl_model/net/weights/model.safetensors`` + ``config.json``, package data); it is found through
:mod:`importlib.resources`, so shipping one needs no code change.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

import torch

from puicl_common.atomic import atomic_write_bytes
from puicl_common.configio import ConfigError, from_mapping, to_dict
from puicl_model.net.config import ModelConfig
from puicl_model.net.weights.kept import KeptModels

__all__ = [
    "CONFIG_FILE",
    "CONFIG_MAXIMA",
    "WEIGHTS_FILE",
    "NoBundledWeightsError",
    "WeightsError",
    "bundled_weights_path",
    "check_config_against_tensors",
    "damaged_tensors",
    "load_model",
    "load_weights",
    "resolve_weights_path",
    "save_weights",
    "stored_checksum",
]

WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
FORMAT_NAME = "puicl-weights"
FORMAT_VERSION = "1"

# The largest sizes a loaded config may ask for: far above any model this project trains (the
# paper's has embed_dim 128, 6 layers, ff_dim 256; the bundled one is smaller still), and low
# enough that a damaged or forged config is refused in one line, not by running out of memory.
CONFIG_MAXIMA: dict[str, int] = {
    "embed_dim": 4096, "num_layers": 128, "num_heads": 256, "ff_dim": 16384,
    "max_features": 10_000,
}
# The largest magnitude a weight may hold. A trained model's stay within a few units (the
# bundled checkpoint's largest is under 2); weights far beyond are damage (an EMA scaled by a
# bug, a hand-edited file with its checksum recomputed) and make the logits overflow to NaN
# scores, so they are refused where weights are exported and loaded, as NaN is.
MAX_WEIGHT_MAGNITUDE = 1e4

# safetensors' names of the floating-point dtypes (anything else cannot hold weights)
_FLOAT_DTYPES = frozenset({"F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2"})


class WeightsError(ValueError):
    """A weights file is missing, unreadable, corrupted or does not fit its model config."""


def _tensor_digest(tensors: Mapping[str, torch.Tensor]) -> str:
    """sha256 over names, dtypes, shapes and raw bytes, in sorted name order."""
    digest = hashlib.sha256()
    for name in sorted(tensors):
        tensor = tensors[name].detach().to("cpu").contiguous()
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(tensor.view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    return digest.hexdigest()


def _canonical_header(blob: bytes) -> bytes:
    """``blob`` with its safetensors header re-serialized with sorted keys.

    The safetensors library writes the metadata from a hash map whose order changes from one
    save to the next, so the same weights would give different files. The header is JSON
    (8-byte little-endian length, then the JSON, padded with spaces to a multiple of 8), and
    tensor offsets count from the end of the header, so it can be rewritten freely.
    """
    size = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8 : 8 + size])
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + blob[8 + size :]


def save_weights(model: torch.nn.Module, path: str | Path) -> Path:
    """Write ``model``'s weights and config; returns the safetensors file written.

    ``path`` ending in ``.safetensors`` writes that single self-contained file; any other
    path is a directory that receives ``model.safetensors`` and ``config.json``. Each file is
    written to a temporary name and renamed, so an interrupted save never leaves a truncated
    file under the final name.
    """
    from safetensors.torch import save

    from puicl_model import __version__
    from puicl_model.net.model import PUICLModel

    if not isinstance(model, PUICLModel):
        raise TypeError(f"save_weights expects a PUICLModel, got {type(model).__name__}")
    path = Path(path)
    tensors = {
        name: tensor.detach().to("cpu", torch.float32).contiguous()
        for name, tensor in model.state_dict().items()
    }
    config_json = json.dumps(model.config.to_mapping(), sort_keys=True)
    metadata = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "model_config": config_json,
        "tensors_sha256": _tensor_digest(tensors),
        "puicl_version": __version__,
    }
    blob = _canonical_header(save(tensors, metadata=metadata))
    if path.suffix == ".safetensors":
        atomic_write_bytes(path, blob)
        return path
    weights_path = path / WEIGHTS_FILE
    atomic_write_bytes(weights_path, blob)
    pretty = json.dumps(model.config.to_mapping(), indent=2, sort_keys=True) + "\n"
    atomic_write_bytes(path / CONFIG_FILE, pretty.encode())
    return weights_path


def bundled_weights_path() -> Path | None:
    """The checkpoint shipped inside the package, or None while none ships."""
    candidate = resources.files(__name__) / WEIGHTS_FILE
    if not candidate.is_file():
        return None
    return Path(str(candidate))


def resolve_weights_path(path: str | Path) -> Path:
    """The safetensors file that ``path`` (a checkpoint directory or file) designates."""
    path = Path(path).expanduser()
    if path.is_dir():
        weights_path = path / WEIGHTS_FILE
        if not weights_path.is_file():
            raise WeightsError(
                f"{path} is a directory without {WEIGHTS_FILE}; pass a checkpoint directory "
                f"written by save_weights / `trainer export`, or a .safetensors file"
            )
        return weights_path
    if not path.is_file():
        raise WeightsError(f"weights not found: {path} (expected a .safetensors file or a "
                           f"directory holding {WEIGHTS_FILE} and {CONFIG_FILE})")
    return path


def _read_config(weights_path: Path, metadata: Mapping[str, str]) -> ModelConfig:
    """The model config from the file's metadata and/or a ``config.json`` beside it."""
    sidecar = weights_path.parent / CONFIG_FILE
    sources: dict[str, dict] = {}
    if "model_config" in metadata:
        try:
            sources[f"the metadata of {weights_path.name}"] = json.loads(metadata["model_config"])
        except json.JSONDecodeError as err:
            raise WeightsError(
                f"{weights_path}: model_config metadata is not JSON: {err}"
            ) from None
    if sidecar.is_file():
        try:
            sources[str(sidecar)] = json.loads(sidecar.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as err:
            raise WeightsError(f"cannot read {sidecar}: {err}") from None
    if not sources:
        raise WeightsError(
            f"{weights_path} carries no model config (no model_config metadata and no "
            f"{CONFIG_FILE} beside it); save it with puicl_model.net.weights.save_weights"
        )
    configs = {}
    for source, data in sources.items():
        try:
            configs[source] = from_mapping(ModelConfig, data, "model")
        except ConfigError as err:
            raise WeightsError(f"invalid model config in {source}: {err}") from None
    if len(configs) == 2:
        (name_a, config_a), (name_b, config_b) = configs.items()
        if config_a != config_b:
            dict_a, dict_b = to_dict(config_a), to_dict(config_b)
            differing = ", ".join(
                f"{key}: {dict_a[key]!r} vs {dict_b[key]!r}"
                for key in dict_a
                if dict_a[key] != dict_b[key]
            )
            raise WeightsError(
                f"the model config in {name_a} and in {name_b} differ ({differing}); the "
                f"checkpoint is inconsistent — export it again"
            )
    return next(iter(configs.values()))


def _describe_shape_mismatch(name: str, found: tuple, expected: tuple, config: ModelConfig) -> str:
    """'<name>: shape (a, b) in file, (c, d) expected by config <field>=<value>'."""
    # Which config fields produce a dimension of the given size.
    producers: dict[int, list[str]] = {}
    for size, text in (
        (config.embed_dim, f"embed_dim={config.embed_dim}"),
        (3 * config.embed_dim, f"embed_dim={config.embed_dim} (q/k/v: 3*embed_dim)"),
        (config.ff_dim, f"ff_dim={config.ff_dim}"),
    ):
        producers.setdefault(size, []).append(text)
    culprits: list[str] = []
    if len(found) == len(expected):
        for got, want in zip(found, expected, strict=True):
            if got != want:
                culprits.extend(producers.get(want, []))
    reason = " or ".join(dict.fromkeys(culprits)) or (
        f"embed_dim={config.embed_dim}, ff_dim={config.ff_dim}"
    )
    return f"{name}: shape {found} in file, {expected} expected by config {reason}"


def _check_config_sizes(config: ModelConfig, source: Path) -> None:
    """Refuse sizes beyond :data:`CONFIG_MAXIMA` before a model of them is built."""
    too_large = [f"{name}={getattr(config, name)} (at most {maximum})"
                 for name, maximum in CONFIG_MAXIMA.items() if getattr(config, name) > maximum]
    if too_large:
        raise WeightsError(f"{source}: the model config asks for sizes beyond what puicl loads: "
                           + ", ".join(too_large) + "; the file is damaged or not PUICL weights")


def _expected_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """The tensor shapes of a model of ``config``, computed without allocating its weights."""
    from puicl_model.net.model import PUICLModel

    with torch.device("meta"):  # shapes only: a lying config costs no memory here
        model = PUICLModel(config)
    return {name: tuple(tensor.shape) for name, tensor in model.state_dict().items()}


def _check_layout(shapes: Mapping[str, tuple[int, ...]], dtypes: Mapping[str, str],
                  config: ModelConfig, source: Path) -> None:
    """Compare the tensors the file's header declares with those ``config`` makes.

    Done on the header alone, before the model is built or a tensor read: a file that fits
    its config holds every weight of the model, so the model is no larger than the file.
    """
    expected = _expected_shapes(config)
    problems: list[str] = []
    missing = [name for name in expected if name not in shapes]
    unexpected = [name for name in shapes if name not in expected]
    if missing:
        problems.append(
            f"missing from the file: {', '.join(missing[:5])}"
            + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
            + f" (config num_layers={config.num_layers})"
        )
    if unexpected:
        problems.append(
            f"in the file but not in a model with config num_layers={config.num_layers}: "
            + ", ".join(unexpected[:5])
            + (f" and {len(unexpected) - 5} more" if len(unexpected) > 5 else "")
        )
    wrong_shapes = [
        _describe_shape_mismatch(name, shapes[name], shape, config)
        for name, shape in expected.items()
        if name in shapes and shapes[name] != shape
    ]
    problems.extend(wrong_shapes[:3])
    if len(wrong_shapes) > 3:
        problems.append(f"{len(wrong_shapes) - 3} more tensors have other shapes")
    for name, dtype in dtypes.items():
        if dtype not in _FLOAT_DTYPES:
            problems.append(f"{name}: dtype {dtype} in file, floating point expected")
    if problems:
        raise WeightsError(
            f"{source} does not fit its model config: " + "; ".join(problems)
        )


def check_config_against_tensors(config: ModelConfig, shapes: Mapping[str, tuple[int, ...]],
                                 source: Path) -> None:
    """The checks :func:`load_weights` makes before it builds a model, for weights held
    elsewhere (a training checkpoint's EMA tensors): the config's sizes within
    :data:`CONFIG_MAXIMA`, and ``shapes`` those of a model of ``config`` (computed on the
    meta device). Raises :class:`WeightsError` naming ``source``."""
    _check_config_sizes(config, source)
    _check_layout(shapes, {}, config, source)


def stored_checksum(path: str | Path) -> str:
    """The tensor checksum (``tensors_sha256``) in the header of the weights at ``path``: it
    identifies the weights without reading the tensors (:func:`load_weights` verifies it)."""
    from safetensors import SafetensorError, safe_open

    weights_path = resolve_weights_path(path)
    try:
        with safe_open(str(weights_path), framework="pt", device="cpu") as handle:
            checksum = (handle.metadata() or {}).get("tensors_sha256")
    except (SafetensorError, OSError) as err:
        raise WeightsError(f"{weights_path} is not a readable safetensors file: {err}") from None
    if not checksum:
        raise WeightsError(f"{weights_path} carries no tensors_sha256 checksum: export it with "
                           "`trainer export` (or save_weights) first")
    return checksum


def _header_config(weights_path: Path, metadata: Mapping[str, str]) -> ModelConfig:
    """The model config of a weights file after its format and sizes are checked."""
    if metadata.get("format", FORMAT_NAME) != FORMAT_NAME:
        raise WeightsError(f"{weights_path} holds {metadata['format']!r}, not PUICL weights")
    version = metadata.get("format_version", FORMAT_VERSION)
    if version != FORMAT_VERSION:
        raise WeightsError(
            f"{weights_path} uses weights format version {version}; this puicl reads version "
            f"{FORMAT_VERSION} — upgrade puicl or re-export the checkpoint"
        )
    config = _read_config(weights_path, metadata)
    _check_config_sizes(config, weights_path)
    return config


def damaged_tensors(tensors: Mapping[str, torch.Tensor]) -> str | None:
    """What is wrong with the values of ``tensors`` (NaN, infinities, or magnitudes above
    :data:`MAX_WEIGHT_MAGNITUDE`), naming the first tensors, or None where nothing is."""
    damaged = []
    for name, tensor in sorted(tensors.items()):
        if not tensor.is_floating_point():
            continue
        if not bool(torch.isfinite(tensor).all()):
            damaged.append(f"{name} (NaN or infinite)")
        elif tensor.numel() and float(tensor.abs().max()) > MAX_WEIGHT_MAGNITUDE:
            damaged.append(f"{name} (|value| up to {float(tensor.abs().max()):.3g})")
    if not damaged:
        return None
    more = f" and {len(damaged) - 3} more" if len(damaged) > 3 else ""
    return (f"values no trained model holds (NaN, infinite or above {MAX_WEIGHT_MAGNITUDE:g} "
            f"in magnitude) in " + ", ".join(damaged[:3]) + more)


def load_weights(path: str | Path, device: str | torch.device = "cpu") -> torch.nn.Module:
    """Rebuild the :class:`~puicl_model.net.model.PUICLModel` stored at ``path``, in eval mode.

    ``path`` is a checkpoint directory or a ``.safetensors`` file. The file's tensor names,
    shapes and checksum are verified against its config, and its values must be finite; any
    problem is a :class:`WeightsError` that says what is wrong. The config's sizes are bounded
    (:data:`CONFIG_MAXIMA`) and the shapes are checked on the file's header before the model
    is built, so metadata that claims a larger model than the file holds allocates nothing.
    A model built from files of the same bytes (the weights and their ``config.json``) is
    checked and built once per process (:data:`VERIFIED_MODELS` keeps the last four), and
    every call returns a copy of its own.
    """
    weights_path = resolve_weights_path(path)
    files = (weights_path, weights_path.parent / CONFIG_FILE)
    contents = _contents_key(files)
    model = VERIFIED_MODELS.get(contents)
    if model is None:
        model = _verified_model(weights_path)
        if _contents_key(files) == contents:  # kept only if no file changed while read
            VERIFIED_MODELS.keep(contents, model)
    # every caller gets a model of its own: one that moves or changes its copy changes no other
    return copy.deepcopy(model).to(device).eval()


# models checked and built from weights files, kept by the files' bytes (kept.py says why)
VERIFIED_MODELS = KeptModels(most=4)


def _contents_key(files: tuple[Path, ...]) -> tuple[str, ...]:
    try:
        return KeptModels.key(files)
    except OSError as err:
        raise WeightsError(f"cannot read {err.filename}: {err.strerror}") from None


def _verified_model(weights_path: Path) -> torch.nn.Module:
    """Read, check and build the model of the weights file at ``weights_path`` (on the CPU, in
    eval mode); :func:`load_weights` documents the checks."""
    from safetensors import SafetensorError, safe_open

    from puicl_model.net.model import PUICLModel

    try:
        with safe_open(str(weights_path), framework="pt", device="cpu") as handle:
            metadata = dict(handle.metadata() or {})
            config = _header_config(weights_path, metadata)
            slices = {name: handle.get_slice(name) for name in handle.keys()}  # noqa: SIM118
            _check_layout({name: tuple(part.get_shape()) for name, part in slices.items()},
                          {name: part.get_dtype() for name, part in slices.items()},
                          config, weights_path)
            tensors = {name: handle.get_tensor(name) for name in slices}
    except (SafetensorError, OSError) as err:
        raise WeightsError(f"{weights_path} is not a readable safetensors file: {err}") from None
    if "tensors_sha256" in metadata and _tensor_digest(tensors) != metadata["tensors_sha256"]:
        raise WeightsError(
            f"{weights_path}: tensor checksum mismatch — the file is corrupted or was modified "
            f"after export; export it again"
        )
    # a checksum vouches for the bytes, not for their values: weights exported from a run
    # that diverged carry NaN, and would score every row NaN without a word
    damaged = damaged_tensors(tensors)
    if damaged:
        raise WeightsError(f"{weights_path}: {damaged}; the weights are damaged (a diverged "
                           "run?): export them from a healthy checkpoint")
    model = PUICLModel(config)
    state = {name: tensor.to(torch.float32) for name, tensor in tensors.items()}
    model.load_state_dict(state, strict=True)
    return model.eval()


class NoBundledWeightsError(FileNotFoundError):
    """No weights were given and the bundled checkpoint is missing from this installation."""


def load_model(weights: str | Path | torch.nn.Module | None,
               device: str | torch.device = "cpu") -> torch.nn.Module:
    """The model ``PUICLClassifier(weights=...)`` runs, in eval mode on ``device``: a loaded
    ``PUICLModel`` as it is, a checkpoint path through :func:`load_weights`, or (None) the
    bundled checkpoint, a :class:`NoBundledWeightsError` where none ships."""
    from puicl_model.net.model import PUICLModel

    if isinstance(weights, PUICLModel):
        return weights.to(device).eval()
    if isinstance(weights, torch.nn.Module):
        raise TypeError(f"weights must be a path or a PUICLModel, got {type(weights).__name__}")
    path = weights if weights is not None else bundled_weights_path()
    if path is None:
        raise NoBundledWeightsError(
            "PUICLClassifier needs trained weights, and the bundled checkpoint is missing from "
            "this installation (looked for puicl_model/net/weights/model.safetensors). Pass "
            "weights=PATH: a checkpoint directory or .safetensors file written by "
            "`trainer export RUN --out DIR` or puicl_model.net.weights.save_weights."
        )
    return load_weights(path, device=device)
