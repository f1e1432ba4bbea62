

def test_probe_of_a_missing_tool_with_a_fallback_is_not_an_error(tmp_path):
    lines = _serious(tmp_path, '''
        import subprocess
        import torch

        IS_JETSON = False


        def gpu_count() -> int:
            if IS_JETSON:
                return torch.cuda.device_count()
            try:
                output = subprocess.check_output(["nvidia-smi", "--query-gpu=count", "--format=csv"], encoding="utf-8")
                first = output.strip().split("\\n", 1)[0]
                return int(first)
            except (subprocess.CalledProcessError, FileNotFoundError, ValueError):
                return 0


        def gpu_memory():
            output = subprocess.check_output(["nvidia-smi", "--query-gpu=memory.used", "--format=csv"])
            return output.decode()
    ''')
    assert not lines & {9, 11}
    assert 19 in lines


def test_rocm_build_check_and_cuda_guarded_housekeeping(tmp_path):
    lines = _serious(tmp_path, '''
        import sys
        import torch


        def rocm_is_available() -> bool:
            return sys.platform == "linux" and bool(torch.version.hip) and torch.cuda.is_available()


        def load(batches):
            for batch in batches:
                yield batch
            if torch.cuda.is_available():
                torch.cuda.empty_cache()


        def place(model):
            if torch.cuda.is_available():
                model = model.to("cuda")
            return model
    ''')
    assert not lines & {6, 12}
    assert 17 in lines


def test_profiler_setup_reads_cuda_for_its_activities(tmp_path):
    lines = _serious(tmp_path, '''
        from contextlib import contextmanager
        import torch
        from torch.profiler import ProfilerActivity, profile


        @contextmanager
        def torch_profile():
            use_cuda = torch.cuda.is_available()
            activities = [ProfilerActivity.CPU]
            if use_cuda:
                activities.append(ProfilerActivity.CUDA)
            with profile(activities=activities) as p:
                yield p


        def pick():
            use_cuda = torch.cuda.is_available()
            return torch.device("cuda" if use_cuda else "cpu")
    ''')
    assert 8 not in lines
    assert 17 in lines or 18 in lines
