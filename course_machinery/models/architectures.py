"""The demo models' networks: the two-moons MLP and the Fashion-MNIST ResNet18.

Only the layers; training them is `training`, their names and settings are `registry`.
"""

from __future__ import annotations

import torch
from torch import nn


class MoonsMLP(nn.Module):
    """2 -> 64 -> 64 -> 2 with ReLU: the seed notebook's small two-moons classifier."""

    def __init__(self, hidden: int = 64):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(2, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 2)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def build_resnet18(num_classes: int = 10) -> nn.Module:
    """torchvision's ResNet18, standard stem, with a 1-channel conv1 for grayscale input."""
    from torchvision.models import resnet18

    model = resnet18(weights=None, num_classes=num_classes)
    model.conv1 = nn.Conv2d(1, 64, kernel_size=7, stride=2, padding=3, bias=False)
    return model


def parameter_count(module: nn.Module) -> int:
    """Trainable parameters of a PyTorch module, a shared (tied) matrix counted once."""
    return sum(p.numel() for p in module.parameters())
