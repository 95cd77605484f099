"""The names the course files and results under: the demo models and the text encoder.

Kept apart from `models` and `text_encoder`, which import PyTorch, so that code that only reads
results (the report) can name them without paying for torch.
"""

MOONS_MLP = "moons_mlp"
RESNET18 = "fashion_resnet18"
TEXT_ENCODER = "text_encoder"
NANOGPT = "nanogpt"
