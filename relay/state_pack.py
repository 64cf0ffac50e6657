"""A checkpoint file carried across a limit on file sizes: packed into parts, unpacked and
checked byte for byte.

A lent GPU machine gives back at most 8 files of 16 MiB each, and the paper model's
checkpoint (weights, EMA and AdamW's two moments in float32, about 19 MB) is larger than one.
The pack is lossless by construction and checked on the way back:

* the file's bytes are byte-shuffled with a stride of 4 (the first byte of every 4-byte word,
  then every second byte, ...): the float32 tensors that make up nearly all of a checkpoint
  keep their sign and exponent bytes, which repeat, side by side, and xz compresses them;
  about 23 % smaller than the raw file (puicl-v1's checkpoint: 3.49 MB to 2.69 MB), against
  14 % for xz alone;
* the shuffled bytes are compressed in blocks of :data:`BLOCK_BYTES`, each an xz stream of its
  own (the blocks compress in parallel threads), and the concatenated streams are cut into
  parts of at most :data:`PART_BYTES`;
* ``state.json`` lists the parts with their sizes and sha256, and the checkpoint's own size,
  sha256 and step.

Unpacking checks every part, never decompresses beyond the recorded size, and checks the
checkpoint's sha256 after unshuffling: a changed, missing or extra byte anywhere is one
:class:`StatePackError` naming the file, and nothing is written.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from puicl_common.atomic import atomic_write_bytes, atomic_write_json

MANIFEST = "state.json"
FORMAT = 1
CODEC = "shuffle4+xz"
STRIDE = 4
PART_BYTES = 15 * 2**20  # under the 16 MiB a lent machine gives back per file
BLOCK_BYTES = 4 * 2**20
XZ_PRESET = 6
PACK_THREADS = 4
PART_NAME = re.compile(r"part-\d{2}\.xz")
SHA256 = re.compile(r"[0-9a-f]{64}")
MAX_CHECKPOINT_BYTES = 2**31  # a manifest claiming more is not one of this tool's


class StatePackError(ValueError):
    """A packed state is missing, damaged or not one this tool wrote."""


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def shuffle(data: bytes, stride: int = STRIDE) -> bytes:
    """Byte ``j`` of every ``stride``-byte word together, for j = 0..stride-1 (zero-padded)."""
    padded = data + bytes(-len(data) % stride)
    return np.frombuffer(padded, dtype=np.uint8).reshape(-1, stride).T.tobytes()


def unshuffle(data: bytes, length: int, stride: int = STRIDE) -> bytes:
    """The inverse of :func:`shuffle` for an original of ``length`` bytes."""
    if len(data) % stride or len(data) - length not in range(stride):
        raise StatePackError(f"{len(data)} shuffled bytes cannot hold {length} bytes")
    words = np.frombuffer(data, dtype=np.uint8).reshape(stride, -1).T
    return words.tobytes()[:length]


def _compress(shuffled: bytes) -> bytes:
    blocks = [shuffled[i:i + BLOCK_BYTES] for i in range(0, len(shuffled), BLOCK_BYTES)]
    # lzma lets go of the GIL while it compresses; a few threads: the host's other cores train
    # and score meanwhile
    with ThreadPoolExecutor(max_workers=PACK_THREADS) as pool:
        return b"".join(pool.map(lambda b: lzma.compress(b, preset=XZ_PRESET), blocks))


def _decompress(data: bytes, limit: int, where: Path) -> bytes:
    """The concatenated xz streams of ``data``, refusing to produce more than ``limit`` bytes."""
    out: list[bytes] = []
    produced = 0
    while data:
        decompressor = lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
        try:
            chunk = decompressor.decompress(data, max_length=limit - produced + 1)
        except lzma.LZMAError as err:
            raise StatePackError(f"{where}: the packed state does not decompress ({err})") from None
        produced += len(chunk)
        if produced > limit or not decompressor.eof:
            raise StatePackError(f"{where}: the packed state holds more than the {limit} bytes "
                                 "its manifest records, or is cut short")
        out.append(chunk)
        data = decompressor.unused_data
    return b"".join(out)


def pack(checkpoint: Path, out_dir: Path, step: int, part_bytes: int = PART_BYTES) -> dict:
    """Pack the checkpoint file of ``step`` into ``out_dir`` (parts, then ``state.json``);
    returns the manifest."""
    data = checkpoint.read_bytes()
    compressed = _compress(shuffle(data))
    out_dir.mkdir(parents=True, exist_ok=True)
    parts = []
    for index, offset in enumerate(range(0, len(compressed), part_bytes)):
        piece = compressed[offset:offset + part_bytes]
        name = f"part-{index:02d}.xz"
        atomic_write_bytes(out_dir / name, piece)
        parts.append({"file": name, "bytes": len(piece), "sha256": sha256_hex(piece)})
    manifest = {"format": FORMAT, "codec": CODEC, "step": step,
                "checkpoint": {"file": checkpoint.name, "bytes": len(data),
                               "sha256": sha256_hex(data)},
                "parts": parts}
    atomic_write_json(out_dir / MANIFEST, manifest)
    return manifest


def read_manifest(state_dir: Path) -> dict[str, Any]:
    """``state.json`` of a packed state, its every field checked before it is used."""
    path = state_dir / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StatePackError(f"{path} does not exist: no packed state there") from None
    except (ValueError, OSError) as err:
        raise StatePackError(f"{path} cannot be read as JSON ({err})") from None
    problem = _manifest_problem(manifest)
    if problem:
        raise StatePackError(f"{path} is not a packed state of this tool: {problem}")
    return manifest


def _manifest_problem(manifest: Any) -> str | None:
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        return f"format is not {FORMAT}"
    if manifest.get("codec") != CODEC:
        return f"codec {manifest.get('codec')!r} is not {CODEC!r}"
    step, checkpoint, parts = manifest.get("step"), manifest.get("checkpoint"), \
        manifest.get("parts")
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        return f"step {step!r} is not a step"
    if not isinstance(checkpoint, dict) or not _sized(checkpoint, MAX_CHECKPOINT_BYTES):
        return "its checkpoint entry lacks a size or sha256"
    if not isinstance(parts, list) or not parts:
        return "it lists no parts"
    names = [part.get("file") if isinstance(part, dict) else None for part in parts]
    if names != [f"part-{i:02d}.xz" for i in range(len(parts))]:
        return f"its parts are not part-00.xz, part-01.xz, ... in order: {names}"
    if not all(_sized(part, MAX_CHECKPOINT_BYTES) for part in parts):
        return "a part lacks a size or sha256"
    return None


def _sized(entry: dict, limit: int) -> bool:
    size, digest = entry.get("bytes"), entry.get("sha256")
    return (isinstance(size, int) and not isinstance(size, bool) and 0 <= size <= limit
            and isinstance(digest, str) and SHA256.fullmatch(digest) is not None)


def unpack(state_dir: Path) -> tuple[dict[str, Any], bytes]:
    """The manifest and the checkpoint file's bytes of a packed state, every byte checked."""
    manifest = read_manifest(state_dir)
    pieces = []
    for part in manifest["parts"]:
        path = state_dir / part["file"]
        try:
            piece = path.read_bytes()
        except OSError as err:
            raise StatePackError(f"{path} cannot be read ({err.strerror or err})") from None
        if len(piece) != part["bytes"] or sha256_hex(piece) != part["sha256"]:
            raise StatePackError(f"{path} is damaged: its size or sha256 differs from "
                                 f"{state_dir / MANIFEST}")
        pieces.append(piece)
    expected = manifest["checkpoint"]
    padded = expected["bytes"] + (-expected["bytes"] % STRIDE)
    data = unshuffle(_decompress(b"".join(pieces), padded, state_dir), expected["bytes"])
    if sha256_hex(data) != expected["sha256"]:
        raise StatePackError(f"{state_dir}: the unpacked checkpoint's sha256 differs from the "
                             "one its manifest records")
    return manifest, data
