"""The time of script mode's stages, for evaluate's budget.

Their step counts are fixed (``torchport.script.stage``): a stage runs whole
or is left out, in registry order, each from what the one before it left.
"""
from __future__ import annotations

from dataclasses import dataclass

from torchport import formatting as fmt
from torchport.planning import StageFigures, StagePlan
from torchport.records import StageSize
from torchport.sampling import format_duration
from torchport.script.stage import stage_seconds, stage_steps


@dataclass(frozen=True)
class ScriptStageCost:
    stage: str  # its registry name: script-trace or script-distributed
    plan_order: int
    reserved: bool = False

    def minimum_s(self, figures: StageFigures) -> float:
        reference = figures.reference
        return stage_seconds(self.stage, reference.step_s or 0.0, reference.overhead_s) if reference else 0.0

    def plan(self, figures: StageFigures, room_s: float, worker_timeout_s: float) -> StagePlan:
        reference = figures.reference
        if reference is None or not reference.step_s:
            return StagePlan()
        needed = self.minimum_s(figures)
        fits = needed <= room_s
        sizes = StageSize(key_order=()).put(
            steps=stage_steps(self.stage), needs_s=round(needed, 1), step_s=reference.step_s, fits=fits,
            why=f"its steps are fixed; {room_s:.0f} s left for it, it needs about "
                f"{format_duration(needed)} at the measured {fmt.seconds(reference.step_s)} a step")
        could_not = None if fits else (
            f"{self.stage}: not run: it needs about {format_duration(needed)} at the "
            f"measured {fmt.seconds(reference.step_s)} a step, {format_duration(max(0.0, room_s))} were left")
        return StagePlan(fits=fits, needs_s=needed if fits else 0.0, sizes=sizes, could_not=could_not)


TRACE_COST = ScriptStageCost("script-trace", plan_order=0)
DISTRIBUTED_COST = ScriptStageCost("script-distributed", plan_order=1)
