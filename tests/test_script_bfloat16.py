"""Whether this CPU runs bfloat16 natively (torchport.script.bfloat16), and script mode saying so when
--redirect-cuda turns a script's CUDA autocast into bfloat16 autocast on a CPU that emulates it.

The parser is read on real /proc/cpuinfo text: this project's AMD EPYC (AVX2 only, captured from its
/proc/cpuinfo on 2026-12-02), and the lines other machines print, written out literally."""
from __future__ import annotations

from pathlib import Path

from test_script_mode import SCRIPTS, evaluate_script, only_run
from torchport.formatting import md
from torchport.report.svg import esc
from torchport.script.bfloat16 import detect, emulation_note, from_cpuinfo, from_sysctl

CPUINFO = Path(__file__).resolve().parent / "data" / "cpuinfo"

# Intel Xeon (Sapphire Rapids, as on AWS m7i): AVX-512 with avx512_bf16 and AMX.
SAPPHIRE_RAPIDS = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 143
model name\t: Intel(R) Xeon(R) Platinum 8488C
flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ss ht \
syscall nx pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology nonstop_tsc cpuid aperfmperf tsc_known_freq pni \
pclmulqdq monitor ssse3 fma cx16 pdcm pcid sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave avx f16c \
rdrand hypervisor lahf_lm abm 3dnowprefetch cpuid_fault invpcid_single ssbd ibrs ibpb stibp ibrs_enhanced fsgsbase \
tsc_adjust bmi1 avx2 smep bmi2 erms invpcid avx512f avx512dq rdseed adx smap avx512ifma clflushopt clwb avx512cd \
sha_ni avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves avx_vnni avx512_bf16 wbnoinvd ida arat avx512vbmi umip pku \
ospke waitpkg avx512_vbmi2 gfni vaes vpclmulqdq avx512_vnni avx512_bitalg tme avx512_vpopcntdq rdpid cldemote \
movdiri movdir64b md_clear serialize amx_bf16 avx512_fp16 amx_tile amx_int8 flush_l1d arch_capabilities
bogomips\t: 4800.00
"""

# Intel Xeon (Skylake-SP, as on AWS c5): AVX-512 (torch reads "AVX512") but no bfloat16 instructions.
SKYLAKE = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8124M CPU @ 3.00GHz
flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ss ht \
syscall nx pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology nonstop_tsc cpuid aperfmperf tsc_known_freq pni \
pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave avx f16c rdrand \
hypervisor lahf_lm abm 3dnowprefetch invpcid_single pti fsgsbase tsc_adjust bmi1 hle avx2 smep bmi2 erms invpcid rtm \
mpx avx512f avx512dq rdseed adx smap clflushopt clwb avx512cd avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves ida \
arat pku ospke
"""

# Arm Neoverse V1 (AWS Graviton3): bf16 (and svebf16).
GRAVITON3 = """processor\t: 0
BogoMIPS\t: 2100.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma lrcpc dcpop \
sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs paca pacg dcpodp svei8mm svebf16 i8mm bf16 dgh rng
CPU implementer\t: 0x41
CPU architecture: 8
CPU variant\t: 0x1
CPU part\t: 0xd40
CPU revision\t: 1
"""

# Arm Neoverse N1 (AWS Graviton2): no bf16.
GRAVITON2 = """processor\t: 0
BogoMIPS\t: 243.75
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp ssbs
CPU implementer\t: 0x41
CPU architecture: 8
CPU variant\t: 0x3
CPU part\t: 0xd0c
CPU revision\t: 1
"""


def test_this_projects_amd_epyc_emulates_bfloat16():
    found = from_cpuinfo((CPUINFO / "amd_epyc_avx2.txt").read_text(), "x86_64")
    assert (found.native, found.source) == (False, "/proc/cpuinfo flags")
    assert found.evidence == "no avx512_bf16/amx_bf16 in /proc/cpuinfo"
    assert emulation_note(found) == "bfloat16 emulated on this CPU (no avx512_bf16/amx_bf16 in /proc/cpuinfo)"


def test_x86_with_and_without_bfloat16_instructions():
    found = from_cpuinfo(SAPPHIRE_RAPIDS, "x86_64")
    assert (found.native, found.evidence) == (True, "amx_bf16/avx512_bf16 in /proc/cpuinfo")
    assert emulation_note(found) is None
    # AVX-512 alone is not bfloat16: what torch's capability ("AVX512") would suggest is not the answer.
    assert from_cpuinfo(SKYLAKE, "x86_64").native is False


def test_aarch64_reads_the_features_line_by_whole_words():
    assert from_cpuinfo(GRAVITON3, "aarch64").native is True
    found = from_cpuinfo(GRAVITON2, "aarch64")
    assert (found.native, found.source, found.evidence) == (False, "/proc/cpuinfo Features", "no bf16 in /proc/cpuinfo")
    # SVE's bfloat16 alone is another extension: the word "bf16" must be there itself.
    assert from_cpuinfo(GRAVITON3.replace(" bf16 ", " "), "aarch64").native is False
    # An x86 flags line is not read on aarch64, nor the other way round.
    assert from_cpuinfo(SAPPHIRE_RAPIDS, "aarch64").native is None
    assert from_cpuinfo(GRAVITON3, "x86_64").native is None


def test_unknown_without_evidence():
    for text, machine in (("", "x86_64"), ("", "aarch64"), (SAPPHIRE_RAPIDS, "ppc64le"), (GRAVITON3, "")):
        found = from_cpuinfo(text, machine)
        assert found.native is None, (machine, found)
        assert emulation_note(found) == f"bfloat16 on this CPU: native or emulated unknown ({found.evidence})"
    assert from_cpuinfo("", "x86_64").evidence == "no 'flags' line in /proc/cpuinfo"
    assert from_cpuinfo("", "riscv64").evidence == "no bfloat16 lookup for the riscv64 architecture"
    # Processors that disagree (a hybrid CPU): which ones the run used is not known.
    mixed = from_cpuinfo(SAPPHIRE_RAPIDS + "\n" + SKYLAKE, "x86_64")
    assert (mixed.native, mixed.evidence) == (None, "avx512_bf16/amx_bf16 on 1 of 2 processors in /proc/cpuinfo")


def test_macos_sysctl_answers():
    assert from_sysctl("1\n").native is True
    assert from_sysctl("0\n").native is False
    assert from_sysctl(None).native is None  # macOS without the key
    assert from_sysctl("\x1b[2J").evidence == "hw.optional.arm.FEAT_BF16: '\\\\x1b[2J'"


def test_redirected_cuda_autocast_says_whether_this_cpu_emulates_bfloat16(tmp_path):
    """A CUDA-written script's autocast under --redirect-cuda on cpu: the record and every report say bfloat16
    is emulated where this CPU's lookup says so (this project's AVX2 machines), and nothing where it is native."""
    script = SCRIPTS / "amp_train.py"
    completed, document = evaluate_script(tmp_path, script, "cpu", "--amp", "autocast-kw", "--workers", "0",
                                          redirect=True, options=("--no-trace", "--no-checks"))
    assert completed.returncode == 0, completed.stderr[-3000:]
    run = only_run(document, "cpu")
    expected = detect()
    assert run["script"]["cpu_bfloat16"] == expected.to_dict()
    [autocast] = [r for r in run["script"]["redirects"] if r["call"].startswith("torch.cuda.amp.autocast")]
    note = emulation_note(expected)
    report_md, report_html = (tmp_path / "report.md").read_text(), (tmp_path / "report.html").read_text()
    if expected.native is True:
        assert autocast["becomes"] == "autocast('cpu', dtype=bfloat16), enabled"
        for text in (completed.stdout, report_md, report_html):
            assert "bfloat16 autocast on this CPU" not in text and "not known to run bfloat16" not in text
        return
    assert autocast["becomes"] == f"autocast('cpu', dtype=bfloat16), enabled; {note}"
    if expected.native is False:
        warning = (f"cpu: bfloat16 autocast on this CPU is emulated ({expected.evidence}): step times are not "
                   "representative of the target; rerun with the script's own AMP off to time float32")
    else:
        warning = f"cpu: bfloat16 autocast ran on a CPU not known to run bfloat16 natively ({expected.evidence})"
    assert warning in completed.stdout
    assert md(warning) in report_md
    assert esc(warning) in report_html
