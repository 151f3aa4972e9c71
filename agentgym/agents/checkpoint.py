"""Agents saved as checkpoint directories: JSON plus safetensors, never pickle.

A checkpoint is a directory holding ``agentgym_agent.json``::

    {"format": 1, "agent": "module:Class", "config": {...}}

and any number of other files (``*.safetensors`` weights, ``*.json`` configs, tokenizer
files). Loading imports ``module`` and calls the class's constructor for checkpoints::

    @classmethod
    def from_checkpoint(cls, path: Path, config: dict) -> Agent: ...

which reads what it needs from ``path`` (``load_tensors`` reads ``model.safetensors``).
Nothing here unpickles: the loader reads JSON, and tensors come through safetensors. The
``agent`` named in the JSON is imported like any ``module:Class`` agent spec, so load only
checkpoints whose agent module you trust.

The checkpoint's identity is ``checkpoint_sha256`` (see there for the exact rule).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from agentgym.agents.protocol import Agent
from agentgym.core.errors import BadInput

CHECKPOINT_FILE = "agentgym_agent.json"
TENSORS_FILE = "model.safetensors"
FORMAT = 1
JUNK_NAMES = frozenset({".DS_Store", "Thumbs.db", "desktop.ini"})
"""File names that operating systems drop into folders; ``checkpoint_sha256`` skips them."""

_DIGEST_HEADER = b"agentgym-checkpoint-sha256-v1\0"
_CHUNK = 1 << 20
_AGENT_SPEC = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")

PathLike = str | os.PathLike[str]


# -- recognising and hashing -------------------------------------------------------------


def is_checkpoint_dir(path: PathLike) -> bool:
    """Whether ``path`` is a directory holding ``agentgym_agent.json``."""
    root = Path(path)
    return root.is_dir() and (root / CHECKPOINT_FILE).is_file()


def checkpoint_files(path: PathLike) -> list[tuple[str, Path]]:
    """The files that make up a checkpoint, as ``(relative POSIX path, path)`` by relative path.

    Every regular file in the tree counts, except files named in ``JUNK_NAMES`` and nested
    checkpoints (a subdirectory holding its own ``agentgym_agent.json``, such as the
    trainer's ``steps/N/``), which are skipped whole. The directory itself may be reached
    through a symbolic link.

    Raises:
        BadInput: ``path`` is not a checkpoint directory, or the tree holds a symbolic link
            or a special file (links are refused, not followed, so that the hash cannot
            depend on anything outside the directory).
    """
    root = Path(path)
    if not is_checkpoint_dir(root):
        raise BadInput(_not_a_checkpoint(root))
    found: list[tuple[str, Path]] = []
    _walk(root, root, found)
    return sorted(found)


def _walk(root: Path, directory: Path, found: list[tuple[str, Path]]) -> None:
    with os.scandir(directory) as entries:
        for entry in entries:
            full = Path(entry.path)
            rel = full.relative_to(root).as_posix()
            if entry.is_symlink():
                raise BadInput(
                    f"{rel!r} in checkpoint {root} is a symbolic link; copy the file in "
                    "instead (links are not followed, so the hash is the same everywhere)"
                )
            if entry.is_dir(follow_symlinks=False):
                if not (full / CHECKPOINT_FILE).is_file():  # a nested checkpoint is its own
                    _walk(root, full, found)
            elif entry.is_file(follow_symlinks=False):
                if entry.name not in JUNK_NAMES:
                    found.append((rel, full))
            else:
                raise BadInput(f"{rel!r} in checkpoint {root} is not a regular file or folder")


def checkpoint_sha256(path: PathLike) -> str:
    r"""A hex sha256 that identifies a checkpoint's contents on any machine.

    The digest covers the files of ``checkpoint_files`` in order of their relative POSIX
    paths. It is the sha256 of ``b"agentgym-checkpoint-sha256-v1\0"`` followed, for each
    file, by its UTF-8 relative path, a ``\0`` byte, its size as 8 bytes big-endian and its
    bytes. Names, contents and the tree's shape count; timestamps, permissions, empty
    directories, OS junk files and nested checkpoints do not.

    Raises:
        BadInput: as ``checkpoint_files``.
    """
    digest = hashlib.sha256(_DIGEST_HEADER)
    for rel, file in checkpoint_files(path):
        digest.update(rel.encode("utf-8") + b"\0")
        with open(file, "rb") as f:
            digest.update(os.fstat(f.fileno()).st_size.to_bytes(8, "big"))
            while chunk := f.read(_CHUNK):
                digest.update(chunk)
    return digest.hexdigest()


# -- loading -----------------------------------------------------------------------------


def read_manifest(path: PathLike) -> dict[str, Any]:
    """Read and check ``agentgym_agent.json``; returns ``{"format", "agent", "config"}``.

    A missing ``config`` reads as ``{}``; keys this version does not know are ignored.

    Raises:
        BadInput: no such file, not JSON, not an object, an unknown ``format``, an ``agent``
            that is not ``module:Class``, or a ``config`` that is not an object.
    """
    root = Path(path)
    if not is_checkpoint_dir(root):
        raise BadInput(_not_a_checkpoint(root))
    file = root / CHECKPOINT_FILE
    try:
        doc = json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise BadInput(f"{file} is not valid JSON: {e.msg} at line {e.lineno}") from None
    except UnicodeDecodeError:
        raise BadInput(f"{file} is not UTF-8 text") from None
    if not isinstance(doc, dict):
        raise BadInput(f"{file} must hold a JSON object, not {type(doc).__name__}")
    fmt = doc.get("format")
    if type(fmt) is not int or fmt != FORMAT:
        raise BadInput(
            f"{file} has checkpoint format {fmt!r}; this agentgym reads format {FORMAT} "
            "(a newer agentgym may read it)"
        )
    agent = doc.get("agent")
    if not isinstance(agent, str) or not _AGENT_SPEC.fullmatch(agent):
        raise BadInput(f"{file}: 'agent' must be a 'module:Class' string, got {agent!r}")
    config = doc.get("config", {})
    if not isinstance(config, dict):
        raise BadInput(f"{file}: 'config' must be a JSON object, got {type(config).__name__}")
    return {"format": fmt, "agent": agent, "config": config}


def load_checkpoint_agent(path: PathLike, options: Mapping[str, Any] | None = None) -> Agent:
    """Build the agent a checkpoint directory describes.

    Reads ``agentgym_agent.json``, imports its ``module:Class`` and returns
    ``Class.from_checkpoint(path, config)``. The directory is also walked as
    ``checkpoint_files`` does, so a checkpoint that loads can always be hashed.

    ``options`` override entries of ``config``; the class names the ones it takes in
    ``OPTIONS`` (a set of config keys), and any other is refused.

    Raises:
        BadInput: a malformed manifest (see ``read_manifest``), a module that does not
            import, a missing class, a class without ``from_checkpoint``, a
            ``from_checkpoint`` that fails, or a result that does not follow the Agent
            protocol.
    """
    root = Path(path)
    manifest = read_manifest(root)
    checkpoint_files(root)
    spec = manifest["agent"]
    from_checkpoint = _from_checkpoint_of(spec)
    allowed: frozenset[str] = getattr(
        getattr(from_checkpoint, "__self__", None), "OPTIONS", frozenset()
    )
    unknown = sorted(set(options or {}) - set(allowed))
    if unknown:
        takes = f"it takes {sorted(allowed)}" if allowed else "it takes none"
        raise BadInput(f"{spec} has no option {', '.join(unknown)} ({takes})")
    try:
        agent = from_checkpoint(root, {**manifest["config"], **(options or {})})
    except (BadInput, ImportError):
        raise
    except Exception as e:
        raise BadInput(
            f"{spec}.from_checkpoint could not load {root}: {type(e).__name__}: {e}"
        ) from e
    if not isinstance(agent, Agent):
        raise BadInput(
            f"{spec}.from_checkpoint returned a {type(agent).__name__}, which does not "
            "follow the Agent protocol (reset and act)"
        )
    return agent


def _from_checkpoint_of(spec: str) -> Callable[[Path, dict[str, Any]], Any]:
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise BadInput(f"cannot import the checkpoint's agent module {module_name!r}: {e}") from e
    cls = getattr(module, attr, None)
    if cls is None:
        raise BadInput(f"the checkpoint's agent module {module_name!r} has no class {attr!r}")
    from_checkpoint = getattr(cls, "from_checkpoint", None)
    if not callable(from_checkpoint):
        raise BadInput(
            f"{spec} cannot load checkpoints: it needs a classmethod "
            "from_checkpoint(path: Path, config: dict) -> Agent"
        )
    return from_checkpoint


def load_tensors(path: PathLike, filename: str = TENSORS_FILE) -> dict[str, np.ndarray]:
    """Read the tensors of ``path/filename`` (a safetensors file) as numpy arrays.

    Raises:
        BadInput: the file is missing or not a readable safetensors file.
        ImportError: the ``safetensors`` package is not installed.
    """
    safetensors_numpy = _import_safetensors_numpy()
    file = Path(path) / filename
    if not file.is_file():
        raise BadInput(f"checkpoint {path} has no {filename}")
    try:
        return dict(safetensors_numpy.load_file(file))
    except Exception as e:  # safetensors raises its own SafetensorError, and OSError
        raise BadInput(f"{file} is not a readable safetensors file: {e}") from e


# -- saving ------------------------------------------------------------------------------


def save_checkpoint(
    path: PathLike,
    agent_spec: str,
    config: Mapping[str, Any],
    tensors: Mapping[str, np.ndarray] | None = None,
) -> Path:
    """Write a checkpoint directory (created if needed) and return its path.

    Writes ``model.safetensors`` from ``tensors`` when given, then ``agentgym_agent.json``
    last, each to a temporary file in the directory renamed into place, so a reader never
    sees a half-written file and a checkpoint is recognised only once its tensors are in.
    Other files already in the directory are left alone.

    Args:
        path: the checkpoint directory.
        agent_spec: ``module:Class`` of a class with ``from_checkpoint``.
        config: JSON-able settings handed to ``from_checkpoint``.
        tensors: named numpy arrays (any numeric dtype; made contiguous).

    Raises:
        BadInput: a malformed ``agent_spec``, a ``config`` that is not JSON-able, or tensors
            that are not numeric arrays.
        ImportError: tensors were given and ``safetensors`` is not installed.
    """
    if not isinstance(agent_spec, str) or not _AGENT_SPEC.fullmatch(agent_spec):
        raise BadInput(f"agent_spec must be 'module:Class', got {agent_spec!r}")
    manifest = {"format": FORMAT, "agent": agent_spec, "config": dict(config)}
    try:
        text = json.dumps(manifest, indent=2, sort_keys=True, allow_nan=False) + "\n"
    except (TypeError, ValueError) as e:
        raise BadInput(f"checkpoint config is not plain JSON: {e}") from None
    root = Path(path)
    root.mkdir(parents=True, exist_ok=True)
    if tensors is not None:
        arrays = _checked_tensors(tensors)
        safetensors_numpy = _import_safetensors_numpy()
        _write_atomic(root / TENSORS_FILE, lambda tmp: safetensors_numpy.save_file(arrays, tmp))
    _write_atomic(root / CHECKPOINT_FILE, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    return root


def _checked_tensors(tensors: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    arrays: dict[str, np.ndarray] = {}
    for name, value in tensors.items():
        array = np.ascontiguousarray(value)
        if not isinstance(name, str) or array.dtype.kind not in "biuf":
            raise BadInput(
                f"tensor {name!r}: names must be strings and arrays bool, int or float "
                f"(got {array.dtype})"
            )
        arrays[name] = array
    return arrays


def _write_atomic(target: Path, write: Callable[[Path], Any]) -> None:
    """Run ``write`` on a temporary sibling of ``target``, flush it, rename it over."""
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it private; a checkpoint is meant to be shared
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def _import_safetensors_numpy() -> Any:
    try:
        import safetensors.numpy
    except ImportError as e:
        raise ImportError(
            "checkpoint tensors need the safetensors package: pip install safetensors"
        ) from e
    return safetensors.numpy


def _not_a_checkpoint(root: Path) -> str:
    if not root.is_dir():
        return f"no checkpoint directory at {root}"
    return (
        f"{root} is not an agentgym checkpoint: it has no {CHECKPOINT_FILE} "
        "(write one with agentgym.agents.checkpoint.save_checkpoint)"
    )
