"""The app behind an ``hf:`` spec (see ``torchport.hf``).

It lives among the built-in apps because, like them, it stands in for the
user's code: the trace attributes what ``transformers`` does to the lines here
(the spec's entry point) and names the library's own frame beside them.
"""
from __future__ import annotations

from typing import Any

import torchport
from torchport import hf


def loss(model: Any, batch: dict[str, Any]) -> Any:
    return model(**batch).loss


def predict(model: Any, batch: dict[str, Any]) -> Any:
    return model(**batch).logits


def app_for(spec: hf.HFSpec | str) -> torchport.App:
    import torch

    resolved = hf.resolve(spec)
    spec = resolved.spec
    return torchport.App(
        name=f"hf-{spec.model_type}",
        description=(f"transformers {resolved.transformers_version} {type(resolved.config).__name__} with a "
                     f"{hf.FAMILY_TEXT[resolved.family]} head, random weights; {hf.batch_text(resolved)}"),
        model=lambda: hf.build_model(resolved),
        data=lambda: hf.make_batches(resolved),
        loss=loss,
        optimizer=lambda model: torch.optim.AdamW(model.parameters(), lr=1e-4),
        predict=predict,
        tokens=None if resolved.family == "image" else hf.tokens_per_batch,
        tags={"hf_model_type": spec.model_type, "hf_family": resolved.family,
              "transformers": resolved.transformers_version},
    )
