"""torchport info: versions, hardware, backends and environments, for a bug report."""
from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchport.records import ToolInfo

# Distributions whose versions explain most bug reports: torchport's own
# dependencies and the vendor packages the backends load.
PACKAGES = ("numpy", "rich", "jsonschema", "packaging", "torch_xla", "torch_tpu", "torch-neuronx", "libtpu")


def register(subparsers: argparse._SubParsersAction) -> None:
    from torchport import output

    parser = subparsers.add_parser(
        "info", help="print versions, hardware, backends and environments (paste it into a bug report)",
        description="Everything a bug report needs about this machine: torchport, Python and torch versions, "
                    "the OS, CPU, memory and accelerators, whether each backend is available here and why, the "
                    "backend environments, and the config file that sets defaults here. Nothing is run on a device.")
    output.add_format(parser, ("text", "json"))
    output.add_json_flag(parser)
    output.add_output(parser)
    parser.set_defaults(func=run)


def collect() -> ToolInfo:
    from importlib import metadata

    from torchport import __version__, backends, envs, project_config
    from torchport.environment import environment_record
    from torchport.records import ToolInfo

    machine = environment_record().to_dict()
    # Bug reports are pasted in public: the host name stays out.
    machine.pop("hostname", None)
    packages: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            packages[name] = None
    rows = [{**cls.describe().to_dict(), **backends.availability(name).as_dict()} for name, cls in backends.registry().items()]
    config = project_config.find()
    return ToolInfo.from_dict({
        "torchport": __version__,
        **machine,
        "packages": packages,
        "backends": rows,
        "environments": [envs.status(name) for name in envs.SPECS],
        "config": str(config) if config else None,
    })


def _gib(value: int | None) -> str:
    return f"{value / 2**30:.1f} GiB" if value else "unknown"


def text_lines(info: ToolInfo) -> list[str]:
    from torchport.commands.env import status_lines

    gpu_build = [f"CUDA {info.torch_cuda}" if info.torch_cuda else "",
                 f"ROCm {info.torch_hip}" if info.torch_hip else ""]
    build = ", ".join(part for part in gpu_build if part) or "CPU-only build"
    if info.accelerators:
        accelerators = "; ".join(f"{a.type}:{a.index} {a.name} ({_gib(a.memory_bytes)})" for a in info.accelerators)
    elif info.torch_cuda or info.torch_hip:
        accelerators = "none seen by torch"
    else:
        accelerators = "none asked: torch is a CPU-only build (other backends below)"
    installed = ", ".join(f"{name} {version}" for name, version in info.packages.items() if version)
    missing = ", ".join(name for name, version in info.packages.items() if not version)
    lines = [
        f"torchport     {info.torchport}",
        f"python        {info.python} ({info.executable})",
        f"torch         {info.torch or 'not installed'} ({build})",
        f"os            {info.platform}",
        f"cpu           {info.cpu} ({info.cpu_count} logical cores)",
        f"memory        {_gib(info.memory_bytes)}",
        f"accelerators  {accelerators}",
        f"driver        {info.driver or 'no NVIDIA driver found'}",
        f"packages      {installed or 'none'}" + (f"; not installed: {missing}" if missing else ""),
        f"config        {info.config or 'none (no torchport.toml or [tool.torchport] from here up)'}",
        "",
        "backends",
    ]
    width = max((len(row.name) for row in info.backends), default=0)
    for row in info.backends:
        state = "available" if row.available else "unavailable"
        reason = f": {row.reason}" if row.reason else ""
        proxy = f" (proxy for {row.proxy_for})" if row.proxy_for else ""
        lines.append(f"  {row.name:<{width}}  {state}{reason}{proxy}")
    lines += ["", "environments"]
    lines += ["  " + line.replace("\n", "\n  ") for line in status_lines(info.environments)]
    return lines


def run(args: argparse.Namespace) -> int:
    from torchport import output

    info = collect()
    if output.chosen_format(args) == "json":
        output.emit(args, json.dumps(info.to_dict(), indent=1, default=str))
    else:
        output.emit(args, "\n".join(text_lines(info)))
    return 0
