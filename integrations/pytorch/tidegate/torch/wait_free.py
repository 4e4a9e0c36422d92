"""WaitFreeDataParallel: data parallelism on tidegate's gradient session.

Every parameter's gradient buffer is registered once with a gradient session
(tidegate_session_*) on the group's tidegate communicator. As backward produces each gradient
(``register_post_accumulate_grad_hook``) the wrapper marks it ready and the session averages it
in the background, most urgent first: priority is the order in which the first forward used
the parameters, so the first layer's gradient, which backward produces last, overtakes the
rest. The next forward waits per layer (forward pre-hooks), so communication overlaps both the
end of backward and the start of the next forward.

Usage::

    model = tidegate.torch.WaitFreeDataParallel(model)            # dense; or codec="fp16", ...
    for x, y in data:
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        model.synchronize()       # every gradient averaged: needed before optimizer.step()
        optimizer.step()

An optimiser that reads every gradient in ``step()`` needs ``synchronize()`` first. The fully
overlapped form updates each parameter when its layer runs next (a per-parameter optimiser
applied from a forward pre-hook registered after this wrapper's, which has waited for that
layer's gradients by then).

Rules (the session's): one backward per step (no gradient accumulation over several backward
calls; a parameter whose gradient arrives twice in a step raises); parameters that get no
gradient in a step are sent as they are at the end of backward (zeros when their ``.grad`` is
None, which it then becomes); while a step runs, post no other collectives on the same process
group (use another group, or ``synchronize()`` first). CPU parameters only (tidegate's session
works on host memory). ``optimizer.zero_grad()`` may set gradients to None: the wrapper copies
a fresh gradient into its registered buffer and points ``.grad`` back at it.
"""

import functools

import torch
import torch.distributed as dist
from torch import nn

from . import _C
from ._group import tidegate_backend

__all__ = ["WaitFreeDataParallel"]


class WaitFreeDataParallel(nn.Module):
    """Wraps `module` for data-parallel training over `process_group` (None: the default
    group, which must be on backend "tidegate").

    codec, allowed, error_feedback: as for tidegate's compressed allreduce (None: dense; a
    codec spec, or "auto" choosing from `allowed`); gradients are averaged (AVG).
    Construction broadcasts rank 0's parameters and buffers, so every rank starts equal; the
    session itself is created (a collective) at the end of the first forward, once the order
    of first use is known.
    """

    def __init__(self, module, process_group=None, codec=None, allowed=None,
                 error_feedback=True):
        super().__init__()
        self.module = module
        self._backend = tidegate_backend(process_group, "WaitFreeDataParallel")
        group = process_group or dist.distributed_c10d._get_default_group()
        self._options = (codec, allowed, bool(error_feedback))
        self._params = [p for p in module.parameters() if p.requires_grad]
        for index, p in enumerate(self._params):
            if p.device.type != "cpu":
                raise NotImplementedError(f"WaitFreeDataParallel takes CPU parameters; "
                                          f"parameter {index} is on {p.device}")
        with torch.no_grad():
            root = dist.get_global_rank(group, 0)
            for tensor in list(module.parameters()) + list(module.buffers()):
                dist.broadcast(tensor, src=root, group=group)
        # The session reduces these buffers in place for its whole life: allocated once,
        # contiguous, and kept as the parameters' .grad.
        self._grads = [torch.zeros_like(p, memory_format=torch.contiguous_format)
                       for p in self._params]
        for p, grad in zip(self._params, self._grads):
            p.grad = grad
        self._session = None
        self._first_use = []          # keys in the order the first forward used them
        self._marked = set()          # keys marked ready in this step
        self._in_backward = False
        self._steps = 0
        self.last_stats = None        # the session's statistics of the last finished step
        key_of = {id(p): key for key, p in enumerate(self._params)}
        for layer in module.modules():
            keys = [key_of[id(p)] for p in layer.parameters(recurse=False) if id(p) in key_of]
            if keys:
                layer.register_forward_pre_hook(functools.partial(self._before_layer, keys))
        for key, p in enumerate(self._params):
            p.register_post_accumulate_grad_hook(functools.partial(self._on_gradient, key))

    def forward(self, *args, **kwargs):
        output = self.module(*args, **kwargs)
        if self._session is None:
            self._create_session()
        return output

    def synchronize(self, timeout_ms=-1):
        """Waits until every gradient of this step is averaged (call before an optimiser step
        that reads all of them). timeout_ms < 0: tidegate's timeout."""
        if self._session is not None:
            self._session.wait_all(timeout_ms)

    wait_all = synchronize

    def close(self):
        """Stops the session (also done when the process group shuts down)."""
        if self._session is not None:
            self._session.close()

    def priorities(self):
        """Each parameter's priority (0: needed first by the forward), in parameters() order."""
        used = set(self._first_use)
        order = self._first_use + [k for k in range(len(self._params)) if k not in used]
        priority = [0] * len(self._params)
        for rank, key in enumerate(order):
            priority[key] = rank
        return priority

    def _create_session(self):
        codec, allowed, error_feedback = self._options
        self._session = _C.GradientSession(self._backend, self._grads, self.priorities(),
                                           codec=codec, allowed=allowed,
                                           error_feedback=error_feedback, average=True)

    def _before_layer(self, keys, _layer, _inputs):
        if self._session is None:
            for key in keys:
                if key not in self._first_use:
                    self._first_use.append(key)
            return
        for key in keys:
            self._session.wait(key)

    def _adopt(self, key):
        """Makes the registered buffer hold the parameter's gradient and be its .grad."""
        p, buffer = self._params[key], self._grads[key]
        if p.grad is None:
            buffer.zero_()
        elif p.grad.data_ptr() != buffer.data_ptr():
            buffer.copy_(p.grad)
        else:
            return
        p.grad = buffer

    def _mark(self, key):
        if key in self._marked:
            raise RuntimeError(f"WaitFreeDataParallel: parameter {key} got a gradient twice in "
                               "one step (one backward per step; no gradient accumulation)")
        self._marked.add(key)
        self._session.ready(key)

    def _on_gradient(self, key, _param):
        if self._session is None:
            raise RuntimeError("WaitFreeDataParallel: backward ran before any forward through "
                               "the wrapper")
        if not self._in_backward:
            self._begin_step()
        self._adopt(key)
        self._mark(key)

    def _begin_step(self):
        if self._steps > 0:
            # Closes the previous step (its gradients were all waited for by now).
            self.last_stats = self._session.step()
        self._marked.clear()
        self._in_backward = True
        self._steps += 1
        # The session needs every gradient once per step: the rest go at the end of backward.
        torch.autograd.Variable._execution_engine.queue_callback(self._end_backward)

    def _end_backward(self):
        for key in range(len(self._params)):
            if key not in self._marked:
                self._adopt(key)
                self._mark(key)
        self._in_backward = False
