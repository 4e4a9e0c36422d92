"""DDP communication hooks that run tidegate's compressed allreduce.

Usage::

    from tidegate.torch import hooks
    state = hooks.CompressionState(codec="topk:ratio=0.01", error_feedback=True)
    ddp.register_comm_hook(state, hooks.compressed_allreduce_hook)
    ...
    checkpoint["comm_hook"] = state.state_dict()       # after optimizer.step()
    state.load_state_dict(checkpoint["comm_hook"])      # in the restored run, before training

Each bucket is averaged over the group by tidegate_icompressed_allreduce under compression key
``bucket.index()``. Error-feedback residuals (and each key's step counter, from which
stochastic codecs draw) live inside the group's tidegate communicator, per key, so one
compression state per process group: two DDP models with compressed hooks on one group would
share residuals (give each its own ``new_group(backend="tidegate")``).

PyTorch's own hooks (``default_hooks.fp16_compress_hook``, ``powerSGD_hook``) need nothing from
here: they run on the tidegate backend as on any other.
"""

import warnings

import torch

from . import _C
from ._group import tidegate_backend

__all__ = ["CompressionState", "compressed_allreduce_hook"]


class CompressionState:
    """The state of :func:`compressed_allreduce_hook`.

    codec           a tidegate codec spec ("fp16", "qsgd:bits=4", "topk:ratio=0.01", ...; the
                    README lists them), "none" for dense, or "auto": per bucket, the cheapest
                    of dense and the codecs in `allowed` by tidegate's plan
    error_feedback  keep what the codec leaves out, per bucket, and add it the next step
                    (biased codecs such as top-k and signsgd need it)
    allowed         for codec "auto": comma-separated codec specs (None: TIDEGATE_CODECS)

    Every rank must pass the same codec, error_feedback and allowed.
    """

    # The default is a codec that converges with error feedback on: top-k 1% reached dense
    # accuracy on the digits MLP, while qsgd:bits=4 (512-element buckets) with error feedback
    # diverged there (its error exceeds the signal).
    def __init__(self, process_group=None, codec="topk:ratio=0.01", error_feedback=True,
                 allowed=None):
        if not isinstance(codec, str) or not codec:
            raise ValueError(f"codec must be a tidegate codec spec string, got {codec!r}")
        if allowed is not None and codec != "auto":
            raise ValueError(f"allowed applies to codec \"auto\" only, got codec {codec!r}")
        self.process_group = process_group
        self.codec = codec
        self.error_feedback = bool(error_feedback)
        self.allowed = allowed
        self._backend = tidegate_backend(process_group, "hooks.CompressionState")
        # The residuals of a key are laid out like its bucket's buffer was when they were made,
        # but DDP reorders its buckets after the first step (by gradient readiness), and a
        # restored run starts in the first-step order again. So each key keeps its residual
        # layout, as positions in the first layout this state saw for it (which the same model
        # under DDP gives every run), and a bucket in another order of the same parameters is
        # permuted into it. A bucket whose parameters change gets its residuals reset.
        self._first_seen = {}   # key -> {parameter data_ptr: position in the first layout}
        self._layouts = {}      # key -> positions of the residual layout's parameters
        self._from_checkpoint = set()  # keys whose layout a checkpoint set, not seen since
        self.layout_resets = 0

    def _permutation(self, bucket):
        """Bucket positions of the parameters in residual-layout order, or None when the
        bucket is laid out as its residuals already."""
        key = bucket.index()
        params = bucket.parameters()
        first = self._first_seen.setdefault(
            key, {p.data_ptr(): i for i, p in enumerate(params)})
        positions = [first.get(p.data_ptr()) for p in params]
        layout = self._layouts.get(key)
        if layout is None or positions == layout:
            self._layouts[key] = positions
            return None
        if key in self._from_checkpoint and sorted(positions) == sorted(layout):
            where = {position: i for i, position in enumerate(positions)}
            return [where[position] for position in layout]
        if self.error_feedback:
            # Every rank sees the same buckets (DDP agrees on them), so every rank resets at
            # the same point; tidegate orders the reset after the collectives posted before.
            warnings.warn(f"tidegate hook: bucket {key} changed its layout; the error-feedback "
                          "residuals are reset", stacklevel=3)
            _C.reset_compression_state(self._backend)
            self.layout_resets += 1
        self._layouts = {key: positions}
        self._from_checkpoint.clear()
        return None

    def state_dict(self):
        """What a checkpoint needs to continue bit for bit: the codec settings, the bucket
        layouts, and this rank's compression state from tidegate (bytes; residuals differ
        between ranks, so each rank saves its own). Call it after ``optimizer.step()``; it
        waits for the collectives already posted on the group."""
        return {
            "codec": self.codec,
            "error_feedback": self.error_feedback,
            "allowed": self.allowed,
            "layouts": {key: list(layout) for key, layout in self._layouts.items()},
            "residuals": _C.save_compression_state(self._backend),
        }

    def load_state_dict(self, state):
        """Restores a :meth:`state_dict` of the same codec settings (ValueError otherwise)
        into this group's communicator. Call it before the first step of the restored run."""
        for field in ("codec", "error_feedback", "allowed"):
            if state[field] != getattr(self, field):
                raise ValueError(f"the checkpoint's hook state has {field}={state[field]!r} but "
                                 f"this CompressionState has {getattr(self, field)!r}")
        _C.load_compression_state(self._backend, state["residuals"])
        self._layouts = {int(key): list(layout) for key, layout in state["layouts"].items()}
        self._from_checkpoint = set(self._layouts)


def compressed_allreduce_hook(state, bucket):
    """DDP comm hook: averages the bucket's flat gradient buffer over ``state.process_group``
    with tidegate's compressed allreduce (key: the bucket index). Returns a Future of the
    averaged buffer, bitwise identical on every rank."""
    buffer = bucket.buffer()
    permutation = state._permutation(bucket)
    if permutation is None:
        work = _C.compressed_allreduce(state._backend, buffer, state.codec, bucket.index(),
                                       state.error_feedback, state.allowed)
        return work.get_future().then(lambda fut: fut.value()[0])
    # The first step of a restored run: compress in the checkpoint's residual layout.
    grads = [bucket.gradients()[i] for i in permutation]
    ordered = torch.cat([g.reshape(-1) for g in grads])
    work = _C.compressed_allreduce(state._backend, ordered, state.codec, bucket.index(),
                                   state.error_feedback, state.allowed)

    def unpermute(fut):
        averaged = fut.value()[0]
        offset = 0
        for g in grads:  # views of `buffer`
            g.copy_(averaged[offset:offset + g.numel()].view_as(g))
            offset += g.numel()
        return buffer

    return work.get_future().then(unpermute)
