"""The names the course files and results under: the demo models, the text encoder, the NanoGPT.

Kept apart from the modules that import PyTorch (`models.registry`, `text_encoder`, `nanogpt`), so
that code that only reads results (the report) can name them without paying for torch.
"""

MOONS_MLP = "moons_mlp"
RESNET18 = "fashion_resnet18"
TEXT_ENCODER = "text_encoder"
NANOGPT = "nanogpt"
