"""Built-in apps, addressed as ``builtin:NAME`` or ``builtin:NAME?key=value``.
Each makes its synthetic data in process from a fixed seed: nothing is downloaded.

``OPTIONS`` lists the options each built-in accepts and their allowed values;
it is read in the parent to check a spec before any worker starts, so this
module imports nothing (no torch).
"""

# builtin:gpt?size=NAME: (layers, width, heads, context, vocabulary, batch, tokens per sample).
# "124m" is GPT-2 small's shape (12 x 768, 12 heads, 50257 tokens, 1024 positions,
# tied input and output embeddings: 124,439,808 parameters), trained on batches of
# 4 x 128 tokens; "tiny" is the default, the small model of the demo and the tests.
GPT_SIZES: dict[str, tuple[int, int, int, int, int, int, int]] = {
    "tiny": (2, 128, 4, 64, 256, 16, 64),
    "124m": (12, 768, 12, 1024, 50257, 4, 128),
}

OPTIONS: dict[str, dict[str, tuple[str, ...]]] = {
    "gpt": {"size": tuple(GPT_SIZES)},
}
