"""``sky:ACCELERATOR[:COUNT]`` targets: SkyPilot launches a cluster, the same evaluation runs there.

torchport builds the SkyPilot task (the accelerators with autostop, a setup
that installs this torchport's wheel and the backends' environments, a run
command that is the same torchport command with the same options), asks
SkyPilot what it would start and at what hourly price, launches only after
``--yes`` or a yes typed in a terminal, fetches the results over the ssh
alias SkyPilot writes for the cluster and tears the cluster down unless
``--keep``.  SkyPilot is reached through its Python API (``torchport[sky]``);
a local SkyPilot API server that this run started is stopped when it ends.

No cloud launch has been run with this code: the task it builds is checked by
SkyPilot's own parser, and the path without a cloud set up is tested.
"""
from __future__ import annotations

import contextlib
import os
import re
import shlex
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torchport import output
from torchport.errors import UserError
from torchport.prices import hourly_text

if TYPE_CHECKING:
    from torchport.remote.runner import Plan
    from torchport.remote.ship import Wheel
    from torchport.remote.targets import Target

SKY_CHECK = "sky check"
DEFAULT_AUTOSTOP_MINUTES = 30
# On the cluster, beside SkyPilot's own ~/sky_workdir; relative to the login folder.
REMOTE_HOME = ".torchport-sky"
VENV = f"{REMOTE_HOME}/venv"
# Relative to the folder the run starts in (the synced workdir, else the login folder).
RESULTS = "torchport-sky-out"
# Accelerator families whose backends need torchport's own environments (`torchport env create NAME`).
_ENVIRONMENTS = (("tpu-", ("xla", "tpu")),)

_ACCELERATOR = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*")


@dataclass(frozen=True)
class Launch:
    """What SkyPilot said it would start for one target, before anything is started."""

    target: Target
    cluster: str
    task: Any            # sky.Task
    resources: str       # SkyPilot's description of the chosen resources
    hourly_price: float | None


def parse_accelerators(text: str) -> tuple[str, int]:
    """``tpu-v6e-1`` -> (tpu-v6e-1, 1); ``H100:8`` -> (H100, 8)."""
    name, _, count = text.partition(":")
    if not _ACCELERATOR.fullmatch(name):
        raise UserError(f"invalid accelerator name {name[:80]!r}: expected e.g. sky:H100:1 or sky:tpu-v6e-1",
                        location=f"sky:{text}"[:200])
    if count and not (count.isdigit() and 0 < int(count) <= 1024):
        raise UserError(f"invalid accelerator count {count[:20]!r}", location=f"sky:{text}"[:200])
    return name, int(count) if count else 1


def cluster_name(target: Target) -> str:
    """A SkyPilot cluster name (lower-case letters, digits and hyphens) for the target."""
    name, count = parse_accelerators(target.destination)
    return "torchport-" + re.sub(r"[^a-z0-9]+", "-", f"{name.lower()}-{count}").strip("-")


def environments_for(accelerator: str) -> tuple[str, ...]:
    for prefix, names in _ENVIRONMENTS:
        if accelerator.lower().startswith(prefix):
            return names
    return ()


def _base_torch() -> str:
    """This machine's torch version without its build tag: pip then picks the cluster's own build."""
    try:
        from importlib.metadata import version

        return version("torch").split("+")[0]
    except Exception:
        return ""


def setup_script(wheel: Wheel, wheel_path: str, accelerator: str) -> str:
    # Every path is relative to the login folder (`cd ~` first): a quoted ~ would not expand.
    """The cluster's setup: a venv seeing the image's packages, torch when the image has none, the wheel, the environments."""
    python = f"{VENV}/bin/python"
    pip = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-input"]
    torch = _base_torch()
    lines = ["set -e", "cd ~", shlex.join(["python3", "-m", "venv", "--system-site-packages", VENV])]
    if torch:
        # The image's torch when it has one (a Neuron or CUDA image); else the same version as here.
        lines.append(f"{shlex.join([python, '-c', 'import torch'])} 2>/dev/null || {shlex.join([*pip, f'torch=={torch}'])}")
    lines.append(shlex.join([*pip, "--no-deps", "--force-reinstall", wheel_path]))
    if wheel.requirements:
        lines.append(shlex.join([*pip, *wheel.requirements]))
    lines += [shlex.join([f"{VENV}/bin/torchport", "env", "create", name]) for name in environments_for(accelerator)]
    return "\n".join(lines) + "\n"


def run_command(plan: Plan) -> str:
    torchport = f"$HOME/{VENV}/bin/torchport"  # the only word left to the shell: $HOME
    argv = [plan.command, *plan.remote_args, *plan.output_arguments(RESULTS)]
    if plan.passthrough:
        argv += ["--", *plan.passthrough]
    return f'"{torchport}" {shlex.join(argv)}\n'


def results_folder(plan: Plan) -> str:
    """Where the run leaves its results, relative to the cluster's login folder."""
    return f"sky_workdir/{RESULTS}" if plan.folder is not None else RESULTS


def task_config(plan: Plan, target: Target, wheel: Wheel, wheel_file: str, autostop_minutes: int) -> dict[str, Any]:
    """The SkyPilot task, as the dictionary its YAML would hold."""
    accelerator, count = parse_accelerators(target.destination)
    wheel_path = f"{REMOTE_HOME}/wheels/{wheel.filename}"
    config: dict[str, Any] = {
        "name": cluster_name(target),
        "resources": {"accelerators": f"{accelerator}:{count}",
                      "autostop": {"idle_minutes": autostop_minutes, "down": True}},
        "file_mounts": {f"~/{wheel_path}": wheel_file},
        "envs": {"TORCHPORT_PROGRESS_INTERVAL": "5"},
        "setup": setup_script(wheel, wheel_path, accelerator),
        "run": run_command(plan),
    }
    if plan.folder is not None:
        config["workdir"] = str(plan.folder)
    return config


def _sky() -> Any:
    try:
        import sky
    except ImportError:
        raise UserError("sky: targets need SkyPilot: pip install 'torchport[sky]' (then `sky check` to set up a cloud)") from None
    return sky


class Session:
    """SkyPilot for one `--on` run: the launches it confirmed, and the API server it started stopped at the end."""

    def __init__(self, plan: Plan, wheel: Wheel, folder: Path):
        self.plan = plan
        self.wheel = wheel
        self.wheel_file = folder / wheel.filename
        self.wheel_file.write_bytes(wheel.data)
        self.launches: dict[str, Launch] = {}
        self.server_was_running = True

    def prepare(self, targets: list[Target]) -> None:
        """Ask SkyPilot what each target would start and at what price; launch nothing."""
        sky = _sky()
        from sky import exceptions, sky_logging
        from sky.client import sdk
        from sky.server import common as server_common
        from sky.utils import dag_utils

        self.server_was_running = not server_common.is_api_server_local() or sdk._local_api_server_running()
        # SkyPilot's own chatter (starting its API server, the optimizer's table) stays out of torchport's lines.
        with sky_logging.silent():
            clouds = sky.get(sdk.enabled_clouds())
        if not clouds:
            raise UserError(f"SkyPilot has no cloud set up here: run `{SKY_CHECK}` to see what each cloud needs")
        for target in targets:
            config = task_config(self.plan, target, self.wheel, str(self.wheel_file), self.plan.autostop_minutes)
            task = sky.Task.from_yaml_config(config)
            try:
                with sky_logging.silent():
                    optimized = sky.get(sdk.optimize(dag_utils.convert_entrypoint_to_dag(task)))
            except exceptions.NoCloudAccessError:
                raise UserError(f"SkyPilot has no cloud set up here: run `{SKY_CHECK}` to see what each cloud needs") from None
            except exceptions.ResourcesUnavailableError as exc:
                raise UserError(f"SkyPilot finds no {target.destination} on the enabled clouds ({', '.join(map(str, clouds))}): "
                                f"{first_line(exc)}", location=target.text) from None
            best = optimized.tasks[0].best_resources
            price = None
            with contextlib.suppress(Exception):
                price = float(best.get_cost(3600))
            self.launches[target.name] = Launch(target, config["name"], task, str(best), price)

    def confirm(self, assume_yes: bool) -> None:
        for launch in self.launches.values():
            output.note(f"{launch.target.text}: SkyPilot would launch {launch.resources} as cluster {launch.cluster}, "
                        f"{hourly_text(launch.hourly_price)}; autostop after {self.plan.autostop_minutes} idle minutes; "
                        + ("kept afterwards (--keep)" if self.plan.keep_cluster else "torn down afterwards"))
        if assume_yes:
            return
        if sys.stdin.isatty() and sys.stderr.isatty():
            answer = input("launch these clusters (they cost money)? [y/N] ").strip().lower()
            if answer in ("y", "yes"):
                return
            raise UserError("not launched")
        raise UserError("launching a cloud cluster costs money: pass --yes to launch (or run in a terminal to be asked)")

    def stop_server(self) -> None:
        """The local API server, when this run started it."""
        if self.server_was_running:
            return
        with contextlib.suppress(Exception):
            from sky import sky_logging
            from sky.client import sdk

            with sky_logging.silent():
                if sdk._local_api_server_running():
                    sdk.api_stop()


@contextlib.contextmanager
def session(plan: Plan, wheel: Wheel, targets: list[Target], assume_yes: bool) -> Iterator[Session]:
    os.environ.setdefault("SKYPILOT_DISABLE_USAGE_COLLECTION", "1")  # torchport sends nothing on the user's behalf
    with tempfile.TemporaryDirectory(prefix="torchport-sky-") as folder:
        current = Session(plan, wheel, Path(folder))
        try:
            try:
                current.prepare(targets)
            except UserError:
                raise
            except Exception as exc:  # SkyPilot's own failure (its API server, its catalog): one line
                raise UserError(f"SkyPilot failed before anything was launched: {type(exc).__name__}: "
                                f"{first_line(exc)}; `{SKY_CHECK}` checks its setup") from None
            current.confirm(assume_yes)
            yield current
        finally:
            current.stop_server()


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else "no message"


def launch_and_wait(launch: Launch, stream: Any) -> int | None:
    """Launch the cluster, run the task there, follow its output; the job's exit status (None: unknown)."""
    sky = _sky()
    from sky.client import sdk

    job_id, _handle = sky.stream_and_get(sdk.launch(launch.task, cluster_name=launch.cluster), output_stream=stream)
    if job_id is None:
        return None
    return int(sdk.tail_logs(launch.cluster, job_id, follow=True, output_stream=stream))


def tear_down(cluster: str) -> None:
    sky = _sky()
    from sky.client import sdk

    sky.stream_and_get(sdk.down(cluster))
