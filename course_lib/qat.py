"""Quantization-aware training, small: the plumbing around lesson 06c's fake quantizer.

The lesson writes the part worth reading: the fake quantizer (ONNX Runtime's own INT4 grid, with
a straight-through gradient) and the training loop. This module does what has to be done around
it: fold each BatchNorm into the convolution before it (so that the weights trained are the
weights ONNX Runtime quantizes), swap every Conv2d and Linear for a twin whose forward uses the
fake-quantized weight, take the twins out again, and export the latent float weights to ONNX.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.fusion import fuse_conv_bn_eval

FakeQuant = Callable[[torch.Tensor], torch.Tensor]


def fold_batchnorm(model: nn.Module) -> nn.Module:
    """A copy of a torchvision ResNet with every BatchNorm folded into the convolution before it.

    The same arithmetic as ONNX Runtime's pre-processing (lesson 03), done in PyTorch so that the
    training sees the folded weights, which are the ones `quantize_static` will round.
    """
    folded = copy.deepcopy(model).eval()
    if not all(hasattr(folded, name) for name in ("conv1", "bn1", "layer1", "fc")):
        raise TypeError(
            f"fold_batchnorm expects a torchvision ResNet (conv1, bn1, layer1-4, fc), got "
            f"{type(model).__name__}; load it with course_lib.load_model('fashion_resnet18').module"
        )
    folded.conv1, folded.bn1 = fuse_conv_bn_eval(folded.conv1, folded.bn1), nn.Identity()
    for layer in (folded.layer1, folded.layer2, folded.layer3, folded.layer4):
        for block in layer:
            block.conv1, block.bn1 = fuse_conv_bn_eval(block.conv1, block.bn1), nn.Identity()
            block.conv2, block.bn2 = fuse_conv_bn_eval(block.conv2, block.bn2), nn.Identity()
            if block.downsample is not None:
                conv, bn = block.downsample
                block.downsample = nn.Sequential(fuse_conv_bn_eval(conv, bn))
    return folded


def _live_taps(size: int, kernel: int, stride: int, pad: int) -> tuple[int, int]:
    """First and last kernel tap that ever sees a real input value (not zero padding)."""
    out = (size + 2 * pad - kernel) // stride + 1
    used = [t for t in range(kernel) if any(0 <= j * stride - pad + t < size for j in range(out))]
    return used[0], used[-1]


class FakeQuantConv2d(nn.Conv2d):
    """A Conv2d whose forward uses `fake_quant(weight)`; the parameter stays the latent float one.

    Taps that only ever multiply zero padding (a 3x3 kernel on layer4's 1x1 maps) are cut from
    the convolution: the same result, with less arithmetic in the forward and backward passes.
    """

    fake_quant: FakeQuant

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.fake_quant(self.weight)
        (h, wd), (kh, kw) = x.shape[-2:], self.kernel_size
        (sh, sw), (ph, pw) = self.stride, self.padding
        (h0, h1), (w0, w1) = _live_taps(h, kh, sh, ph), _live_taps(wd, kw, sw, pw)
        if (h0, h1, w0, w1) == (0, kh - 1, 0, kw - 1):
            return F.conv2d(x, w, self.bias, self.stride, self.padding)
        oh, ow = (h + 2 * ph - kh) // sh + 1, (wd + 2 * pw - kw) // sw + 1
        top, left = ph - h0, pw - w0
        bottom = (oh - 1) * sh + (h1 - h0 + 1) - h - top
        right = (ow - 1) * sw + (w1 - w0 + 1) - wd - left
        x = F.pad(x, (left, right, top, bottom))
        return F.conv2d(x, w[:, :, h0 : h1 + 1, w0 : w1 + 1], self.bias, self.stride, 0)


class FakeQuantLinear(nn.Linear):
    """A Linear whose forward uses `fake_quant(weight)`."""

    fake_quant: FakeQuant

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.fake_quant(self.weight), self.bias)


_TWINS = {nn.Conv2d: FakeQuantConv2d, nn.Linear: FakeQuantLinear}
_PLAIN = {twin: plain for plain, twin in _TWINS.items()}


def with_fake_quant(model: nn.Module, fake_quant: FakeQuant) -> nn.Module:
    """A copy of `model` in which every Conv2d and Linear computes with `fake_quant(weight)`.

    The parameters are shared with nothing and keep their float values: training updates the
    latent float weights, and the forward pass sees them rounded.
    """
    if not callable(fake_quant):
        raise TypeError(f"fake_quant must be a function of a weight tensor, got {type(fake_quant).__name__}")
    twin = copy.deepcopy(model)
    for module in twin.modules():
        if type(module) in _TWINS:
            module.__class__ = _TWINS[type(module)]
            module.fake_quant = fake_quant
    return twin


def without_fake_quant(model: nn.Module) -> nn.Module:
    """A copy of a `with_fake_quant` model with plain Conv2d/Linear and the latent float weights.

    This is what to export: `quantize_static` then rounds the same weights, with the same scales,
    that the fake quantizer rounded during training.
    """
    plain = copy.deepcopy(model)
    for module in plain.modules():
        if type(module) in _PLAIN:
            del module.fake_quant
            module.__class__ = _PLAIN[type(module)]
    return plain


def export_onnx(model: nn.Module, path: str | Path, opset: int = 21) -> Path:
    """Export a (1, 32, 32) image classifier to ONNX with a dynamic batch, as the course's models.

    Opset 21, since INT4 `QuantizeLinear`/`DequantizeLinear` need it. Not `models.export_onnx`:
    that one writes the cached model's weight hash and test accuracy into the file's metadata,
    which would be false for fine-tuned weights.
    """
    import onnx

    path = Path(path)
    model = model.eval()
    with torch.no_grad():
        torch.onnx.export(
            model,
            (torch.zeros(1, 1, 32, 32),),
            str(path),
            dynamo=True,
            external_data=False,
            verbose=False,
            opset_version=opset,
            input_names=["input"],
            output_names=["logits"],
            dynamic_shapes=({0: torch.export.Dim("batch")},),
        )
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    return path
