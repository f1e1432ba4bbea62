"""Round 10: the false float64 (TP701) classes of judges 417392, 583917 and 924238, and
float64 in the tests shipped inside wheels (docs/precision/round10.md).  Each test holds a
false alarm quiet and a close true lock-in line at error, so recall does not drop."""
from __future__ import annotations

from pathlib import Path

from scan_marks import check_marked_lines
from scan_marks import write_snippet as _write


def _check(root: Path, *paths: Path) -> None:
    check_marked_lines([root], paths)


def test_float64_in_an_installed_packages_tests_is_quiet_and_in_the_users_own_tests_kept(tmp_path):
    # mace-torch's wheel ships tests/ with torch.set_default_dtype(torch.float64)
    wheel = tmp_path / "wheel"
    (wheel / "mace_torch-0.3.16.dist-info").mkdir(parents=True)
    packaged = _write(wheel, "tests/test_models.py", '''
        import torch


        def test_virials():
            torch.set_default_dtype(torch.float64)  # quiet
    ''')
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    (project / "project.egg-info").mkdir()  # a development install keeps the project the user's own
    own = _write(project, "tests/test_train.py", '''
        import torch


        def test_train(device):
            torch.set_default_dtype(torch.float64)  # kept
            return torch.ones(2).to(device)
    ''')
    check_marked_lines([wheel, project], (packaged, own))


def test_a_dtype_table_entry_is_quiet(tmp_path):
    # schnetpack TORCH_DTYPES, rl_games numpy_to_torch_dtype_dict, mace dtype_dict.get(..., torch.float64)
    _check(tmp_path, _write(tmp_path, "dtypes.py", '''
        import torch

        TORCH_DTYPES = {
            "float32": torch.float32,
            "float64": torch.float64,  # quiet
        }


        def build(args, make):
            return make(dtype=TORCH_DTYPES.get(args.default_dtype, torch.float64))  # quiet


        def outputs(out):
            return {"energy": out.double()}  # kept
    '''))


def test_float64_chosen_by_a_dtype_option_is_quiet(tmp_path):
    # mace foundations_models.py:314 and calculators/mace.py:317
    _check(tmp_path, _write(tmp_path, "choice.py", '''
        import torch


        def calculator(models, default_dtype="float32"):
            dtype = torch.float32 if default_dtype == "float32" else torch.float64  # quiet
            if default_dtype == "float64":
                models = [model.double() for model in models]  # quiet
            return models, dtype


        def forward(x, wide):
            if wide > 2:
                x = x.double()  # kept
            return x
    '''))


def test_float64_handed_to_a_function_without_a_device_is_quiet_unless_moved(tmp_path):
    # e3nn _so3_clebsch_gordan, _reduce.py: bases computed on the CPU in float64
    _check(tmp_path, _write(tmp_path, "basis.py", '''
        import torch
        import torch.nn.functional as F

        from mylib import build_model, change_basis


        def clebsch_gordan(l1):
            q1 = change_basis(l1, dtype=torch.float64)  # quiet
            return q1


        def train(device):
            model = build_model(dtype=torch.float64)  # kept
            model.to(device)
            return model


        def train_on(device):
            return change_basis(3, dtype=torch.float64, device=device)  # kept


        def probabilities(logits):
            return F.softmax(logits, dim=-1, dtype=torch.float64)  # kept
    '''))


def test_a_model_loaded_onto_the_cpu_then_cast_is_quiet(tmp_path):
    # schnetpack batchwise_optimization.py:160, md/calculators/schnetpack_calculator.py:98
    _check(tmp_path, _write(tmp_path, "load.py", '''
        import torch


        def load(path, device):
            host = torch.load(path, map_location="cpu").to(torch.float64)  # quiet
            there = torch.load(path, map_location=device).to(torch.float64)  # kept
            return host, there
    '''))


def test_float64_in_lammps_code_is_quiet(tmp_path):
    # mace calculators/lammps_mliap_mace.py:204: LAMMPS runs on the CPU or CUDA/HIP, never MPS
    lammps = _write(tmp_path, "lammps_mliap.py", '''
        def update_lammps_data(pair_forces):
            return pair_forces.double()  # quiet
    ''')
    other = _write(tmp_path, "calculator.py", '''
        def update_data(pair_forces):
            return pair_forces.double()  # kept
    ''')
    _check(tmp_path, lammps, other)


def test_float64_in_a_cached_constant_without_a_device_is_quiet(tmp_path):
    # e3nn o3/_wigner.py:155, _so3_clebsch_gordan: lru_cached, cast by its callers
    _check(tmp_path, _write(tmp_path, "cg.py", '''
        import functools

        import torch

        from mylib import su2_clebsch_gordan


        @functools.lru_cache(maxsize=None)
        def so3_clebsch_gordan(l1, l2, l3):
            return su2_clebsch_gordan(l1, l2, l3).to(dtype=torch.complex128)  # quiet


        @functools.lru_cache(maxsize=None)
        def so3_clebsch_gordan_on(l1, device):
            return su2_clebsch_gordan(l1, l1, l1).to(dtype=torch.complex128, device=device)  # kept
    '''))
