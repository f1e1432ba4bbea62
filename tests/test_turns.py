"""Turn-taking between real processes (the benchmarks' lockstep pairing)."""
import json
import os
import subprocess
import sys
import time

import pytest

from torchport.turns import TurnCoordinator

PARTY = """
import json, sys, time
from torchport.turns import take_turn
name, turns = sys.argv[1], int(sys.argv[2])
spans = []
for _ in range(turns):
    take_turn()
    started = time.monotonic()
    time.sleep(0.02)
    spans.append([name, started, time.monotonic()])
take_turn()
print(json.dumps(spans))
"""


def start(name, turns, coordinator):
    env = {**os.environ, **coordinator.environment}
    return subprocess.Popen([sys.executable, "-c", PARTY, name, str(turns)], stdout=subprocess.PIPE, text=True, env=env)


@pytest.mark.parametrize("run_length", [1, 2])
def test_two_processes_never_run_together_and_alternate(run_length):
    coordinator = TurnCoordinator(parties=2, run_length=run_length)
    parties = [start("A", 6, coordinator), start("B", 6, coordinator)]
    spans = sorted((span for p in parties for span in json.loads(p.communicate(timeout=60)[0])), key=lambda s: s[1])
    coordinator.close()
    assert all(p.returncode == 0 for p in parties)
    for earlier, later in zip(spans, spans[1:]):
        assert earlier[2] <= later[1], f"{earlier} overlaps {later}"
    order = "".join(span[0] for span in spans)
    first, second = order[0], "B" if order[0] == "A" else "A"
    expected = (first + second) * 6 if run_length == 1 else (first + (second * 2 + first * 2) * 3)[:12]
    assert order == expected
    assert coordinator.turns_granted == 14  # 6 timed turns and a closing one each


def test_closing_the_coordinator_releases_a_party_left_waiting():
    coordinator = TurnCoordinator(parties=2)  # the second party never comes
    alone = start("A", 3, coordinator)
    time.sleep(1.0)
    assert alone.poll() is None, "a party must wait until every party has connected"
    coordinator.close()
    out, _ = alone.communicate(timeout=60)
    assert alone.returncode == 0 and len(json.loads(out)) == 3
    assert coordinator.turns_granted == 0


def test_without_a_coordinator_taking_a_turn_does_nothing():
    env = {k: v for k, v in os.environ.items() if k != "TORCHPORT_TURNS"}
    done = subprocess.run([sys.executable, "-c", PARTY, "A", "2"], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0 and len(json.loads(done.stdout)) == 2


def test_a_party_that_dies_while_waiting_is_never_granted_again():
    import socket

    coordinator = TurnCoordinator(parties=2)
    survivor = start("A", 4, coordinator)
    time.sleep(1.0)  # A has connected and asked
    doomed = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    doomed.connect(coordinator.path)
    doomed.sendall(b"t")  # queued behind A...
    doomed.close()  # ...and gone before its turn
    out, _ = survivor.communicate(timeout=30)
    coordinator.close()
    assert survivor.returncode == 0 and len(json.loads(out)) == 4
