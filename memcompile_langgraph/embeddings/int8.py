"""An int8 variant of the local MiniLM, built once from the shipped model and cached.

The shipped model stores int8 weights but computes in fp32 (the weights are cast back at load). Re-quantizing the
weight MatMuls with int8 scales lets onnxruntime use its integer GEMM kernels, which embed packet documents faster.
The scales are per channel because per-tensor scales move the vectors much further from the fp32 ones. Activations
are quantized per call, so the embedder feeds one text per call to keep each text's vector independent of what else
is being embedded.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from ..settings import cache_root

if TYPE_CHECKING:
    import onnx

log = logging.getLogger(__name__)

RECIPE = "int8-pc-2"  # bump when the steps below change: cached files are keyed by it
MODEL_NAME = "all-MiniLM-L6-v2"
_CHROMA_CACHE = Path.home() / ".cache" / "chroma" / "onnx_models" / MODEL_NAME / "onnx"


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


def model_identity(model_dir: Path, precision: str = "int8") -> tuple[str, Path]:
    """(what a store records as the maker of its vectors, the model file that makes them); the int8 model is built
    on first use. Cheap once built: no session is opened, so `stats` can tell whose vectors a store holds."""
    built = int8_model(model_dir) if precision == "int8" else None
    if built is not None:
        return f"{MODEL_NAME}/{built.stem}", built
    return f"{MODEL_NAME}/fp32-{model_digest(model_dir / 'model.onnx')}", model_dir / "model.onnx"


def model_digest(model: Path) -> str:
    return _sha256(model)[:16]


def _onnxruntime_version() -> str:
    """Read from the installed package's metadata: importing onnxruntime is slow, and `stats` does not need it;
    builds under another distribution name (onnxruntime-gpu, ...) are imported to ask."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("onnxruntime")
    except PackageNotFoundError:
        import onnxruntime

        ort_version: str = onnxruntime.__version__
        return ort_version


def _fingerprint(model: Path) -> str:
    return hashlib.sha256(f"{model_digest(model)}/{RECIPE}/{_onnxruntime_version()}".encode()).hexdigest()[:20]


def _quantizer_advice(record: logging.LogRecord) -> bool:
    """The quantizer logs advice on the root logger ("consider pre-processing") that a user cannot act on."""
    return "onnxruntime" not in record.pathname


def _drop_nan_guards(graph: onnx.GraphProto) -> None:
    """Where(IsNaN(softmax), 0, softmax) after each attention softmax only matters for a row with every key masked,
    which an attention mask with at least one real token cannot produce: dropping them saves time, the vectors are
    the same."""
    producer = {o: n for n in graph.node for o in n.output}
    dropped, bypass = [], {}
    for n in graph.node:
        guard = producer.get(n.input[0]) if n.op_type == "Where" else None
        if guard is not None and guard.op_type == "IsNaN" and guard.input[0] == n.input[2]:
            dropped += [n, guard]
            bypass[n.output[0]] = n.input[2]
    for n in dropped:
        graph.node.remove(n)
    for n in graph.node:
        for i, name in enumerate(n.input):
            if name in bypass:
                n.input[i] = bypass[name]


def _build(model: Path, out: Path, heads: int, hidden: int) -> None:
    import onnx
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers import optimizer

    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        folded, fused = Path(tmp) / "folded.onnx", Path(tmp) / "fused.onnx"
        opts = ort.SessionOptions()  # constant folding turns the int8 weights + scales into plain fp32 initializers
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        opts.optimized_model_filepath = str(folded)
        ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
        # opt_level 0: the graph fusions only (bias+GELU, skip+LayerNorm); level 1 would need torch installed
        optimizer.optimize_model(
            str(folded), model_type="bert", num_heads=heads, hidden_size=hidden, opt_level=0
        ).save_model_to_file(str(fused))
        model_proto = onnx.load(str(fused))
        graph = model_proto.graph
        _drop_nan_guards(graph)
        onnx.save(model_proto, str(fused))
        weights = {i.name for i in graph.initializer}
        matmuls = [n.name for n in graph.node if n.op_type == "MatMul" and any(x in weights for x in n.input)]
        staged = Path(tmp) / "model.onnx"
        root = logging.getLogger()
        root.addFilter(_quantizer_advice)
        try:
            quantize_dynamic(
                str(fused), str(staged), weight_type=QuantType.QInt8, per_channel=True, nodes_to_quantize=matmuls
            )
        finally:
            root.removeFilter(_quantizer_advice)
        ort.InferenceSession(str(staged), providers=["CPUExecutionProvider"])  # a build that does not load is no build
        _commit(staged, out)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _digest_file(model: Path) -> Path:
    return model.with_name(model.name + ".sha256")


def _write_synced(path: Path, data: bytes) -> None:
    with path.open("wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _commit(staged: Path, out: Path) -> None:
    """Model, then its digest, each synced and renamed into place, then the folder synced: a crash leaves no
    zero-length or half file that passes for the model (the digest, written last, vouches for it)."""
    with staged.open("rb+") as f:
        os.fsync(f.fileno())
    digest, stat = _digest_file(staged), staged.stat()  # a rename keeps size and mtime
    _write_synced(digest, f"{_sha256(staged)} {stat.st_size} {stat.st_mtime_ns}".encode())
    os.replace(staged, out)  # atomic: a concurrent builder or reader never sees half a file
    os.replace(digest, _digest_file(out))
    folder = os.open(out.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def cached_model_ok(model: Path) -> bool:
    """The cached file is whole: its digest file exists and matches it. A file with the size and mtime recorded at
    its commit is not hashed again, as that would slow every command's start; a truncated or rewritten one is."""
    try:
        recorded = _digest_file(model).read_text().split()
        stat = model.stat()
        if recorded[1:] == [str(stat.st_size), str(stat.st_mtime_ns)]:
            return True
        return bool(recorded) and recorded[0] == _sha256(model)
    except OSError:
        return False


def int8_model(model_dir: Path, rebuild: bool = False) -> Path | None:
    """The cached int8 model for model_dir/model.onnx, built on first use, and built again when the cached file fails
    its digest (or `rebuild`: it failed to load); None (fp32 is used, with one warning) when it cannot be built."""
    source = model_dir / "model.onnx"
    try:
        name = model_dir.parent.name if model_dir.name == "onnx" else model_dir.name
        target = cache_root() / "models" / f"{name}-{_fingerprint(source)}.onnx"
        if not rebuild and target.is_file() and cached_model_ok(target):
            return target
        if target.is_file() and not rebuild:  # (a rebuild's caller has said why)
            log.warning("cached int8 embedding model %s is damaged; building it again", target)
        cfg = json.loads((model_dir / "config.json").read_text()) if (model_dir / "config.json").is_file() else {}
        target.parent.mkdir(parents=True, exist_ok=True)
        _build(source, target, int(cfg.get("num_attention_heads", 12)), int(cfg.get("hidden_size", 384)))
        return target
    except Exception as exc:  # noqa: BLE001 - a missing `onnx`, a read-only cache: the fp32 model still works
        log.warning("int8 embedding model unavailable (%s); using the fp32 model", exc)
        return None
