"""Default embeddings: all-MiniLM-L6-v2 on onnxruntime + tokenizers, fully offline.

Chroma's own ONNX function pads every input to 256 tokens, which is slow; here nothing is padded.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Protocol, cast

import numpy as np
from langchain_core.embeddings import Embeddings
from numpy.typing import NDArray

from .int8 import (  # noqa: F401 - find_model_dir is re-exported
    _CHROMA_CACHE,
    find_model_dir,
    int8_model,
    model_identity,
)

if TYPE_CHECKING:
    import onnxruntime
    from tokenizers import Tokenizer

log = logging.getLogger(__name__)

_warned = False


class _Input(Protocol):
    name: str


class _Session(Protocol):
    """What is used of an onnxruntime InferenceSession: onnxruntime ships no types."""

    def get_inputs(self) -> list[_Input]: ...
    def run(
        self, output_names: list[str] | None, input_feed: dict[str, NDArray[np.int64]]
    ) -> list[NDArray[np.float32]]: ...


class MiniLMEmbeddings(Embeddings):
    """One text per inference call, `workers` calls side by side on one single-threaded session.

    A text alone needs no padding, and its vector cannot depend on what else is embedded with it (the int8 model
    quantizes activations per call). Side-by-side single-threaded runs embed faster than one run on two intra-op
    threads. onnxruntime's spinning is off so an idle worker leaves its core free.
    `precision="fp32"` runs the shipped model as it is.
    """

    def __init__(
        self, model_dir: str | Path, max_length: int = 256, workers: int | None = None, precision: str = "int8"
    ) -> None:
        if precision not in ("int8", "fp32"):
            raise ValueError(f"precision must be 'int8' or 'fp32', not {precision!r}")
        model_dir = Path(model_dir)
        # what a store records as the maker of its vectors: another model file or recipe makes it re-embed
        self.identity, self._model_file = model_identity(model_dir, precision)
        self.precision = "fp32" if self._model_file == model_dir / "model.onnx" else "int8"
        self._max_length = max_length
        # (tokenizer, session, input names): loaded at the first embedding
        self._loaded: tuple[Tokenizer, _Session, set[str]] | None = None
        self._load_lock = threading.Lock()
        self.workers = max(1, workers or min(_cores(), 8))
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        self.model_dir = model_dir

    def _runtime(self) -> tuple[Tokenizer, _Session, set[str]]:
        """Tokenizer and ONNX session, made on first use: opening a store (stats, forget) never loads the model."""
        if self._loaded is None:
            with self._load_lock:
                if self._loaded is None:
                    import onnxruntime as ort
                    from tokenizers import Tokenizer

                    tokenizer = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
                    tokenizer.enable_truncation(max_length=self._max_length)
                    tokenizer.no_padding()
                    opts = ort.SessionOptions()
                    opts.log_severity_level = 3
                    opts.intra_op_num_threads = 1
                    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
                    # onnxruntime's run is thread-safe: one session (one copy of the weights) serves every worker
                    session = self._open_session(ort, opts)
                    self._loaded = (tokenizer, session, {i.name for i in session.get_inputs()})
        return self._loaded

    def _open_session(self, ort: ModuleType, opts: onnxruntime.SessionOptions) -> _Session:
        """The model's session; a cached int8 file that does not load is built again, and when that fails too the
        shipped fp32 model is used (one warning: the vectors differ slightly from the int8 ones)."""

        def open_(path: Path) -> _Session:
            return cast(_Session, ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"]))

        try:
            return open_(self._model_file)
        except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own exception types for a bad file
            if self.precision != "int8":
                raise
            log.warning("int8 embedding model %s does not load (%s); building it again", self._model_file, exc)
        rebuilt = int8_model(self.model_dir, rebuild=True)  # None: it has warned that fp32 is used
        if rebuilt is not None:
            try:
                return open_(rebuilt)
            except Exception as exc:  # noqa: BLE001
                log.warning("rebuilt int8 embedding model does not load (%s); using the fp32 model", exc)
        self._model_file, self.precision = self.model_dir / "model.onnx", "fp32"
        return open_(self._model_file)

    def preload(self) -> None:
        """Starts loading the tokenizer and the session in a thread: onnxruntime builds the session with the GIL
        released, so a command overlaps it with its own imports (the first embedding waits for it). A failure is
        left to that first embedding to raise."""

        def load() -> None:
            with contextlib.suppress(Exception):
                self._runtime()

        threading.Thread(target=load, name="memcompile-model-load").start()

    @property
    def tokenizer(self) -> Tokenizer:
        return self._runtime()[0]

    @property
    def session(self) -> _Session:
        return self._runtime()[1]

    def _one(self, ids: list[int]) -> NDArray[np.float32]:
        _, session, inputs = self._runtime()
        row = np.asarray([ids], dtype=np.int64)
        feeds = {"input_ids": row, "attention_mask": np.ones_like(row)}
        if "token_type_ids" in inputs:
            feeds["token_type_ids"] = np.zeros_like(row)
        # mean pooling: no padding, every token counts
        pooled: NDArray[np.float32] = session.run(None, feeds)[0][0].mean(0)
        return pooled / max(float(np.linalg.norm(pooled)), 1e-12)

    def _embed(self, texts: list[str]) -> NDArray[np.float32]:
        out = np.zeros((len(texts), 384), dtype=np.float32)
        if not texts:
            return out
        enc = [e.ids for e in self.tokenizer.encode_batch([t or " " for t in texts])]
        if len(texts) == 1 or self.workers == 1:
            for i, ids in enumerate(enc):
                out[i] = self._one(ids)
            return out
        # longest first, dealt round-robin: each worker gets a similar share of tokens
        order = sorted(range(len(enc)), key=lambda i: -len(enc[i]))

        def work(share: list[int]) -> None:
            for i in share:
                out[i] = self._one(enc[i])

        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="memcompile-embed")
        for f in [self._pool.submit(work, order[w :: self.workers]) for w in range(self.workers)]:
            f.result()
        return out

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return cast("list[list[float]]", self._embed(list(texts)).tolist())  # numpy types tolist() as Any

    def embed_query(self, text: str) -> list[float]:
        return cast("list[float]", self._embed([text])[0].tolist())  # numpy types tolist() as Any

    def embed_array(self, texts: list[str]) -> NDArray[np.float32]:
        return self._embed(list(texts))


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))  # the cores this process may use (containers, taskset)
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def default_embeddings() -> MiniLMEmbeddings | None:
    """The local model when it can be found, else Chroma's own (which may download), else None with one warning."""
    global _warned
    model_dir = find_model_dir()
    if model_dir is not None:
        return MiniLMEmbeddings(model_dir)
    try:
        from chromadb.utils.embedding_functions import ONNXMiniLM_L6_V2

        fn = ONNXMiniLM_L6_V2()
        fn(["warm-up"])  # downloads the model once, or raises offline
        return MiniLMEmbeddings(_CHROMA_CACHE)
    except Exception as exc:  # noqa: BLE001 - any failure means "no dense channel", never a crash
        if not _warned:
            log.warning(
                "no embedding model available (%s); the dense channel stays empty. Set MEMCOMPILE_MODEL_DIR.", exc
            )
            _warned = True
        return None
