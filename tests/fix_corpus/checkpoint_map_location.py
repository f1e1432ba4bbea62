"""A checkpoint saved and loaded back onto "cuda:0" (map_location, torch.device and
.to() with an index), as resume code written on one GPU does.

Runs on the CPU before the fix: no.
"""
import io

import torch


def main():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2).to("cuda:0")
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    state = torch.load(buffer, map_location="cuda:0")
    restored = torch.nn.Linear(4, 2).to(torch.device("cuda:0"))
    restored.load_state_dict(state)
    x = torch.ones(3, 4, device="cuda:0")
    print(f"same {torch.equal(model(x), restored(x))} total {restored(x).sum().item():.6f}")


if __name__ == "__main__":
    main()
