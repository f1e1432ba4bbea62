"""Every form .cuda() takes: nothing, an int, a "cuda:N" string, a torch.device,
non_blocking=; the current device read back and made current with torch.cuda.device.

Runs on the CPU before the fix: no.
"""
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.proj(x).relu()


def main():
    torch.manual_seed(0)
    index = torch.cuda.current_device()
    net = Net().cuda()
    a = torch.ones(2, 4).cuda(index)
    b = torch.ones(2, 4).cuda("cuda:0")
    c = torch.ones(2, 4).cuda(torch.device("cuda", 0))
    d = torch.ones(2, 4).cuda(non_blocking=True)
    with torch.cuda.device(index):
        e = torch.ones(2, 4).cuda()
    total = sum(net(t).sum() for t in (a, b, c, d, e))
    print(f"total {total.item():.6f}")


if __name__ == "__main__":
    main()
