"""Default embeddings: all-MiniLM-L6-v2 on onnxruntime + tokenizers with dynamic padding, fully offline.

Chroma's own ONNX function pads every input to 256 tokens (~20 sentences/s on 2 cores); padding each
batch only to its longest member runs ~25x faster with the same vectors.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np
from langchain_core.embeddings import Embeddings

log = logging.getLogger(__name__)

MODEL_NAME = "all-MiniLM-L6-v2"
_CHROMA_CACHE = Path.home() / ".cache" / "chroma" / "onnx_models" / MODEL_NAME / "onnx"
_warned = False


def find_model_dir() -> Path | None:
    """$MEMCOMPILE_MODEL_DIR (the folder or its onnx/), then Chroma's cache folder."""
    candidates = []
    env = os.environ.get("MEMCOMPILE_MODEL_DIR")
    if env:
        candidates += [Path(env) / "onnx", Path(env)]
    candidates.append(_CHROMA_CACHE)
    for c in candidates:
        if (c / "model.onnx").is_file() and (c / "tokenizer.json").is_file():
            return c
    return None


class MiniLMEmbeddings(Embeddings):
    """Texts are tokenized once, sorted by token count and cut into batches of similar length under a padded-token
    budget, so little compute goes to padding. The vectors do not depend on batching or thread count (tests compare
    them with one-text-at-a-time encoding).

    onnxruntime's worker threads spin between ops by default; on a small machine that spinning takes the core the
    rest of the pipeline (and other processes) need, so it is off.
    """

    def __init__(self, model_dir: str | Path, batch_size: int = 64, max_length: int = 256, threads: int | None = None, token_budget: int = 4096):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        model_dir = Path(model_dir)
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=max_length)
        self.tokenizer.no_padding()  # each batch is padded to its own longest member below
        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        if threads:
            opts.intra_op_num_threads = threads
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(str(model_dir / "model.onnx"), opts, providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self.session.get_inputs()}
        self.batch_size = batch_size
        self.token_budget = token_budget
        self.model_dir = model_dir

    def _batches(self, lengths: list[int]) -> list[list[int]]:
        """Indices by token count, grouped while batch_size and the padded-token budget allow."""
        out: list[list[int]] = []
        for i in sorted(range(len(lengths)), key=lengths.__getitem__):
            # sorted ascending: the newcomer is the longest, so the padded size is (n + 1) * its length
            if out and len(out[-1]) < self.batch_size and (len(out[-1]) + 1) * lengths[i] <= self.token_budget:
                out[-1].append(i)
            else:
                out.append([i])
        return out

    def _embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), 384), dtype=np.float32)
        enc = self.tokenizer.encode_batch([t or " " for t in texts])
        for idx in self._batches([len(e.ids) for e in enc]):
            width = max(len(enc[i].ids) for i in idx)
            ids = np.zeros((len(idx), width), dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for row, i in enumerate(idx):
                ids[row, : len(enc[i].ids)] = enc[i].ids
                mask[row, : len(enc[i].ids)] = 1
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._inputs:
                feeds["token_type_ids"] = np.zeros_like(ids)
            hidden = self.session.run(None, feeds)[0]
            m = mask[..., None].astype(np.float32)
            pooled = (hidden * m).sum(1) / np.clip(m.sum(1), 1e-9, None)
            pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
            out[idx] = pooled
        return out

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._embed(list(texts)).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self._embed([text])[0].tolist()

    def embed_array(self, texts: list[str]) -> np.ndarray:
        return self._embed(list(texts))


def default_embeddings() -> Embeddings | None:
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
            log.warning("no embedding model available (%s); the dense channel stays empty. Set MEMCOMPILE_MODEL_DIR.", exc)
            _warned = True
        return None
