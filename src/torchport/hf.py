"""``hf:MODEL_TYPE[?key=value&...]``: a Hugging Face ``transformers`` architecture as an app.

The model is built from ``transformers``' own config class for that model type,
with random weights (``from_config``), so nothing is downloaded: the hub is
switched off (``HF_HUB_OFFLINE=1``) before ``transformers`` is imported and
``from_pretrained`` is never called.  ``key=value`` pairs override the
config's fields, typed by the field's annotation; ``batch_size`` and
``seq_len`` size the synthetic batch (also ``--batch-size``/``--seq-len``).

The task head follows the family, tried in this order: a sequence-to-sequence
LM for encoder-decoders (t5, bart), a masked LM for encoders (bert, roberta),
a causal LM for decoders (gpt2, llama, mistral, qwen2), image classification
for vision models (vit).  The loss is the model's own, from the batch's labels.

Dropout is switched off unless an override sets it: a dropout mask is drawn
from each backend's own generator, so with it on the parity check would
compare different computations.

This module imports ``transformers`` only inside its functions: the parent
process parses and validates a spec (``preflight``) before any worker starts.
"""
from __future__ import annotations

import difflib
import math
import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeGuard

from torchport.errors import UserError

if TYPE_CHECKING:
    import torch

PREFIX = "hf:"
INSTALL_HINT = "pip install 'torchport[hf]'"
# The synthetic batch: small enough for a 2-core CPU with a full-width model.
DEFAULT_BATCH_SIZE = 4
DEFAULT_SEQ_LEN = 64
BATCHES = 8  # distinct synthetic batches per epoch
MASKED_SHARE = 0.15  # masked-LM: share of positions with a label (BERT's 15%)
# Keys of the spec that size the batch rather than the model.
BATCH_KEYS = ("batch_size", "seq_len")

# (family, transformers' mapping of model type -> head class, head class name in
# transformers' Auto API).  Order matters: bart is also a causal LM, bert too.
FAMILIES = (
    ("seq2seq", "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES", "AutoModelForSeq2SeqLM"),
    ("masked", "MODEL_FOR_MASKED_LM_MAPPING_NAMES", "AutoModelForMaskedLM"),
    ("causal", "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "AutoModelForCausalLM"),
    ("image", "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES", "AutoModelForImageClassification"),
)
FAMILY_TEXT = {"seq2seq": "sequence-to-sequence LM", "masked": "masked LM", "causal": "causal LM",
               "image": "image classification"}


def is_hf_spec(text: str | None) -> TypeGuard[str]:
    return text is not None and text.strip().startswith(PREFIX)


@dataclass(frozen=True)
class HFSpec:
    text: str
    model_type: str
    overrides: dict[str, str] = field(default_factory=dict)  # raw text values, typed by resolve()
    batch_size: int = DEFAULT_BATCH_SIZE
    seq_len: int = DEFAULT_SEQ_LEN


def parse(text: str) -> HFSpec:
    """Split ``hf:TYPE?k=v&k=v``; no transformers needed."""
    body = text.strip()[len(PREFIX):]
    model_type, _, query = body.partition("?")
    model_type = model_type.strip()
    if not model_type:
        raise UserError(f"no model type after {PREFIX!r} (e.g. hf:gpt2)", location=text)
    overrides: dict[str, str] = {}
    for item in filter(None, query.split("&")):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UserError(f"override {item!r} is not key=value", location=text)
        if key in overrides:
            raise UserError(f"override {key!r} given twice", location=text)
        overrides[key] = value.strip()
    sizes = {}
    for key in BATCH_KEYS:
        if key in overrides:
            raw = overrides.pop(key)
            try:
                sizes[key] = int(raw)
            except ValueError:
                raise UserError(f"{key}={raw!r}: expected a positive integer", location=text) from None
            if sizes[key] < 1:
                raise UserError(f"{key}={raw!r}: expected a positive integer", location=text)
    return HFSpec(text.strip(), model_type, overrides, **sizes)


def with_sizes(spec: HFSpec, batch_size: int | None, seq_len: int | None) -> HFSpec:
    """``spec`` with ``--batch-size``/``--seq-len`` applied, its text saying so, so
    that the worker, the result document and the config hash all see them."""
    if batch_size is None and seq_len is None:
        return spec
    batch_size = spec.batch_size if batch_size is None else batch_size
    seq_len = spec.seq_len if seq_len is None else seq_len
    pairs = {**spec.overrides, "batch_size": str(batch_size), "seq_len": str(seq_len)}
    text = f"{PREFIX}{spec.model_type}?" + "&".join(f"{k}={v}" for k, v in pairs.items())
    return HFSpec(text, spec.model_type, dict(spec.overrides), batch_size, seq_len)


def check_batch_options(text: str | None, batch_size: int | None, seq_len: int | None) -> None:
    if (batch_size is not None or seq_len is not None) and not is_hf_spec(text):
        raise UserError("--batch-size and --seq-len apply to hf: app specs only "
                        "(an app file sizes its own batches)", location=text or None)


def with_batch_options(text: str | None, batch_size: int | None, seq_len: int | None) -> str | None:
    """The spec text with ``--batch-size``/``--seq-len`` folded in."""
    check_batch_options(text, batch_size, seq_len)
    if batch_size is None and seq_len is None:
        return text
    assert text is not None, "checked: an hf: spec"
    return with_sizes(parse(text), batch_size, seq_len).text


# --- resolving against transformers ------------------------------------------------------

def _transformers() -> Any:
    os.environ["HF_HUB_OFFLINE"] = "1"  # never reach the hub, whatever the caller's environment says
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    try:
        import transformers
    except ImportError:
        import sys
        from pathlib import Path

        from torchport.envs import MANIFEST

        if (Path(sys.prefix) / MANIFEST).exists():  # a backend's own environment (e.g. xla)
            name = Path(sys.prefix).name
            raise UserError(f"hf: app specs need transformers in the {name} environment; with {INSTALL_HINT} "
                            f"installed, run: torchport env create {name} (it adds transformers)") from None
        raise UserError(f"hf: app specs need the transformers package; install it with: {INSTALL_HINT}") from None
    return transformers


def head_mappings() -> dict[str, dict[str, str]]:
    """family -> {model type: head class name}, from transformers' own tables."""
    from transformers.models.auto import modeling_auto

    return {family: dict(getattr(modeling_auto, table)) for family, table, _ in FAMILIES}


def family_of(model_type: str, mappings: dict[str, dict[str, str]]) -> str | None:
    return next((family for family, _, _ in FAMILIES if model_type in mappings[family]), None)


@dataclass
class Resolved:
    spec: HFSpec
    family: str
    config: Any
    head: str  # the Auto class that builds it
    transformers_version: str


def resolve(spec: HFSpec | str) -> Resolved:
    """The config with its overrides applied, and the head to build: every
    bad-input case ends here as one UserError."""
    if isinstance(spec, str):
        spec = parse(spec)
    transformers = _transformers()
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING, CONFIG_MAPPING_NAMES

    mappings = head_mappings()
    if spec.model_type not in CONFIG_MAPPING_NAMES:
        supported = sorted(t for t in CONFIG_MAPPING_NAMES if family_of(t, mappings))
        close = difflib.get_close_matches(spec.model_type, supported, n=3)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise UserError(f"unknown model type {spec.model_type!r} for transformers {transformers.__version__}; "
                        f"{hint}known ({len(supported)}): {', '.join(supported)}", location=spec.text)
    family = family_of(spec.model_type, mappings)
    if family is None:
        raise UserError(f"model type {spec.model_type!r} has no supported task head (torchport builds "
                        f"{', '.join(FAMILY_TEXT.values())})", location=spec.text)
    config_class = CONFIG_MAPPING[spec.model_type]
    fields = config_fields(config_class)
    values: dict[str, Any] = {}
    for key, raw in spec.overrides.items():
        if key not in fields:
            raise UserError(f"{key!r} is not a field of {config_class.__name__} (valid: "
                            f"{', '.join(sorted(fields))}; batch: {', '.join(BATCH_KEYS)})", location=spec.text)
        values[key] = typed_value(key, raw, fields[key], spec.text)
        _check_range(key, raw, values[key], spec.text)
    # Dropout off unless asked for (see the module docstring).
    for name in fields:
        if name not in values and re.search(r"dropout|pdrop", name) and _is_number_field(fields[name]):
            values[name] = 0.0
    try:
        config = config_class(**values)
    except Exception as exc:  # transformers validates its configs: e.g. heads that do not divide the width
        raise UserError(f"{config_class.__name__} rejected the overrides: {type(exc).__name__}: {exc}",
                        location=spec.text) from None
    _check_lengths(spec, family, config)
    _complete_token_ids(config, family, set(values))
    return Resolved(spec, family, config, dict((f, h) for f, _, h in FAMILIES)[family], transformers.__version__)


def config_fields(config_class: Any) -> dict[str, str]:
    """Field name -> annotation text, for the fields a user may override."""
    import dataclasses

    if dataclasses.is_dataclass(config_class):
        found = {f.name: str(f.type) for f in dataclasses.fields(config_class)}
    else:  # transformers before configs became dataclasses: the defaults' types
        found = {k: type(v).__name__ for k, v in config_class().to_dict().items()}
    internal = {"transformers_version", "architectures", "model_type", "dtype", "id2label", "label2id",
                "_name_or_path", "problem_type"}
    return {name: annotation for name, annotation in found.items()
            if name not in internal and not name.startswith("_")}


# Fields that count or size something (layers, heads, widths, positions,
# vocabulary): zero or less fails deep inside transformers, with its message.
_COUNT_FIELD = re.compile(r"^n_|^num_|_size$|_dim$|^n[a-z]+$|layers|heads|positions|vocab|embd|experts|intermediate")


def _check_range(key: str, raw: str, value: Any, where: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise UserError(f"{key}={raw!r}: expected a finite number", location=where)
    if isinstance(value, int) and not isinstance(value, bool) and value < 1 and _COUNT_FIELD.search(key):
        raise UserError(f"{key}={raw!r}: a count or size, expected a positive integer", location=where)


def _is_number_field(annotation: str) -> bool:
    return "float" in annotation or "int" in annotation


_BOOL = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def typed_value(key: str, raw: str, annotation: str, where: str) -> Any:
    """``raw`` as the type the config field declares (int, float, bool, str, or None where allowed)."""
    names = set(re.findall(r"\b(bool|int|float|str|None|NoneType|list|dict|tuple)\b", annotation))
    if raw.lower() in ("none", "null") and names & {"None", "NoneType"}:
        return None
    for name, convert in (("bool", lambda s: _BOOL[s.lower()]), ("int", int), ("float", float), ("str", str)):
        if name in names:
            try:
                return convert(raw)
            except (KeyError, ValueError):
                continue
    if names & {"list", "dict", "tuple"} or not names:
        import json

        try:
            return json.loads(raw)
        except ValueError:
            pass
    expected = annotation.replace("<class '", "").replace("'>", "")
    raise UserError(f"{key}={raw!r}: expected {expected}", location=where)


def _check_lengths(spec: HFSpec, family: str, config: Any) -> None:
    if family == "image":
        return
    limit = next((getattr(config, name) for name in ("max_position_embeddings", "n_positions")
                  if isinstance(getattr(config, name, None), int)), None)
    if limit is not None and spec.seq_len > limit:
        raise UserError(f"seq_len {spec.seq_len} is longer than the model's {limit} positions", location=spec.text)


def _complete_token_ids(config: Any, family: str, overridden: set[str]) -> None:
    """Special token ids the training step needs, kept inside the vocabulary.
    A config built from its class alone may leave the decoder's start token
    unset (T5: transformers says to use the pad token), and a smaller
    ``vocab_size`` leaves the defaults (gpt2's 50256) outside it."""
    vocab = getattr(config, "vocab_size", None)
    if family == "seq2seq" and getattr(config, "decoder_start_token_id", None) is None:
        config.decoder_start_token_id = getattr(config, "pad_token_id", None) or 0
    if not isinstance(vocab, int):
        return
    for name in ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id", "mask_token_id"):
        value = getattr(config, name, None)
        if name not in overridden and isinstance(value, int) and value >= vocab:
            setattr(config, name, vocab - 1)


def check_fits_host(resolved: Resolved) -> None:
    """Refuse, before any worker starts, a model whose float32 weights alone
    exceed this machine's memory: every backend builds the app's model on the
    host first (the app contract), so that run could only be killed.  The
    parameters are counted on the meta device (no memory, no initialization)."""
    import torch
    from transformers.initialization import no_init_weights

    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return
    with torch.device("meta"), no_init_weights():
        model = build_model(resolved)
    model.tie_weights()
    count = sum(p.numel() for p in model.parameters())
    if 4 * count > physical:
        raise UserError(f"{count / 1e9:.1f}B parameters: {4 * count / 2**30:.1f} GiB of float32 weights alone, more "
                        f"than this machine's {physical / 2**30:.1f} GiB; shrink it with overrides (e.g. fewer "
                        f"layers) or size it without allocating: torchport memory '{resolved.spec.text}'",
                        location=resolved.spec.text)


def build_model(resolved: Resolved, dtype: Any = None) -> Any:
    """Random weights from the config (never from_pretrained); ``dtype`` None
    keeps float32, which the harness then casts as it does every app."""
    import transformers

    auto = getattr(transformers, resolved.head)
    return auto.from_config(resolved.config) if dtype is None else auto.from_config(resolved.config, dtype=dtype)


# --- the synthetic batch ------------------------------------------------------------------

def batch_text(resolved: Resolved) -> str:
    spec, config = resolved.spec, resolved.config
    if resolved.family == "image":
        return (f"batch {spec.batch_size} x {config.num_channels}x{config.image_size}x{config.image_size} "
                f"random pixels, {config.num_labels} classes")
    return f"batch {spec.batch_size} x {spec.seq_len} random tokens (vocabulary {config.vocab_size})"


def make_batches(resolved: Resolved, count: int = BATCHES, device: Any = None) -> list[dict[str, torch.Tensor]]:
    """Batches of the right kind for the family, from a fixed seed."""
    import torch

    spec, config = resolved.spec, resolved.config
    generator = torch.Generator().manual_seed(2024)
    batches = []
    for _ in range(count):
        if resolved.family == "image":
            size = (spec.batch_size, config.num_channels, config.image_size, config.image_size)
            batch = {"pixel_values": torch.randn(size, generator=generator),
                     "labels": torch.randint(0, config.num_labels, (spec.batch_size,), generator=generator)}
        else:
            shape = (spec.batch_size, spec.seq_len)
            ids = torch.randint(0, config.vocab_size, shape, generator=generator)
            batch = {"input_ids": ids, "attention_mask": torch.ones(shape, dtype=torch.long)}
            if resolved.family == "causal":
                batch["labels"] = ids.clone()  # the model shifts them itself
            elif resolved.family == "masked":
                chosen = torch.rand(shape, generator=generator) < MASKED_SHARE
                chosen[:, 0] = True  # at least one label per row, so the loss is never empty
                batch["labels"] = torch.where(chosen, ids, torch.full_like(ids, -100))
                mask_id = getattr(config, "mask_token_id", None)
                if isinstance(mask_id, int) and 0 <= mask_id < config.vocab_size:
                    batch["input_ids"] = torch.where(chosen, torch.full_like(ids, mask_id), ids)
            else:  # seq2seq: targets of the same length; the model makes its decoder inputs from them
                batch["labels"] = torch.randint(0, config.vocab_size, shape, generator=generator)
        if device is not None:
            batch = {k: v.to(device) for k, v in batch.items()}
        batches.append(batch)
    return batches


def tokens_per_batch(batch: dict[str, torch.Tensor]) -> int:
    """Input tokens (batch x sequence length) of a text batch."""
    return int(batch["input_ids"].numel())


def add_batch_arguments(parser: Any) -> None:
    """``--batch-size``/``--seq-len`` for the commands that run an app."""
    from torchport.options import count

    parser.add_argument("--batch-size", type=count(1), default=None, metavar="N",
                        help=f"hf: specs only: batch size of the synthetic batch (default {DEFAULT_BATCH_SIZE})")
    parser.add_argument("--seq-len", type=count(1), default=None, metavar="N",
                        help=f"hf: specs only: sequence length of the synthetic batch (default {DEFAULT_SEQ_LEN})")


def app_from_args(args: Any) -> str | None:
    """The app spec of a command line, with its batch options folded in."""
    return with_batch_options(args.app, getattr(args, "batch_size", None), getattr(args, "seq_len", None))
