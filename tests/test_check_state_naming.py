"""A recovery failure caused by state outside state_dict names it, with the
checkpoint check's wording (tests/apps/check_unrestorable.py keeps a running
scale as a plain tensor attribute: a restarted run starts it again from 1)."""
from __future__ import annotations

import json

from conftest import APPS, run_torchport


def test_recovery_failure_names_the_state_outside_state_dict(tmp_path):
    out = tmp_path / "check.json"
    done = run_torchport("check", str(APPS / "check_unrestorable.py"), "-b", "cpu", "--only", "recovery",
                         "--recovery-steps", "12", "--checkpoint-every", "3", "--kill-seed", "1", "--timeout", "200",
                         "--format", "json", "-o", str(out), timeout=500)
    assert done.returncode == 1, done.stderr[-3000:]
    (recovery,) = json.loads(out.read_text())["checks"]
    assert recovery["status"] == "fail", recovery["reason"]
    assert recovery["figures"]["outside_state_dict"] == ["0.scale"]
    line = next(number for number, text in enumerate((APPS / "check_unrestorable.py").read_text().splitlines(), 1)
                if "self.scale = torch.ones(1)" in text)
    assert recovery["reason"].endswith("; not in the checkpoint (state outside state_dict): 0.scale (plain tensor "
                                       f"attribute, created at {APPS / 'check_unrestorable.py'}:{line})")
