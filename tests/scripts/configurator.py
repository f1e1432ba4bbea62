"""A nanoGPT-style script: its settings are module globals overridden by
--key=value arguments parsed as Python literals (so --compile=True, not
--compile=true), and it compiles its model when compile is True."""
import ast
import sys

import torch
from torch import nn

device = "cpu"
compile = False
batch_size = 16
learning_rate = 1e-3
max_iters = 100000

for argument in sys.argv[1:]:
    key, _, value = argument[2:].partition("=")
    if key not in globals():
        raise ValueError(f"unknown config key: {key}")
    try:
        parsed = ast.literal_eval(value)
    except (SyntaxError, ValueError):
        parsed = value  # a plain string (the device)
    if type(parsed) is not type(globals()[key]):
        raise ValueError(f"--{key}={value}: expected {type(globals()[key]).__name__}, got {type(parsed).__name__}")
    globals()[key] = parsed

torch.manual_seed(1337)
model = nn.Sequential(nn.Linear(32, 128), nn.GELU(), nn.Linear(128, 32)).to(device)
if compile:
    model = torch.compile(model)
optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, betas=(0.9, 0.95))
data = torch.randn(1024, 32)
for _iteration in range(max_iters):
    index = torch.randint(0, len(data), (batch_size,))
    x = data[index].to(device)
    loss = nn.functional.mse_loss(model(x), x.roll(1, dims=1))
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
