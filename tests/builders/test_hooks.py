"""One forward with recording hooks: they see the forward, and none is left on the model after it, even where the
forward raises."""

import pytest
import torch

from builders.models.hooks import forward_once


def test_the_hooks_see_the_forward_and_are_removed_after_it():
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
    seen: list[tuple[int, ...]] = []
    handle = model[0].register_forward_pre_hook(lambda _m, args: seen.append(tuple(args[0].shape)))
    forward_once(model, torch.ones(2, 4), [handle])
    assert seen == [(2, 4)] and not model[0]._forward_pre_hooks
    model(torch.ones(5, 4))
    assert seen == [(2, 4)]


def test_a_forward_that_raises_leaves_no_hook():
    model = torch.nn.Linear(4, 3)
    handle = model.register_forward_pre_hook(lambda _m, args: None)
    with pytest.raises(RuntimeError):
        forward_once(model, torch.ones(2, 5), [handle])  # 5 features into a layer of 4
    assert not model._forward_pre_hooks


def test_the_forward_keeps_no_graph():
    model = torch.nn.Linear(4, 3)
    outputs: list[torch.Tensor] = []
    handle = model.register_forward_hook(lambda _m, _args, out: outputs.append(out))
    forward_once(model, torch.ones(1, 4), [handle])
    assert not outputs[0].requires_grad
