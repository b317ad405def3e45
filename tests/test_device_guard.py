"""The conftest guard (issue 16 §3): a CPU test that would run isles with ``device=auto`` fails on
every machine, not only on a GPU workstation; a ``gpu`` test is left alone."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CASES = """
import subprocess, sys
import pytest
from isles.islands.coordinator import Coordinator


def test_coordinator_without_device():
    Coordinator({"islands": {}}, None)


def test_run_py_without_device():
    subprocess.run([sys.executable, "run.py", "+experiment=cmepso", "logger=none"])


def test_resume_names_its_device_through_the_checkpoint():
    with pytest.raises(FileNotFoundError):  # the guard let it start
        subprocess.run(["/no/such/python", "run.py", "checkpoint.resume=/tmp/x.pkl"])


@pytest.mark.gpu
def test_gpu_test_is_not_guarded():
    with pytest.raises(Exception) as err:  # the Coordinator itself refuses the empty config
        Coordinator({"islands": {}}, None)
    assert "device=cpu" not in str(err.value)
"""


def test_guard_fails_cpu_tests_that_leave_the_device_to_auto(tmp_path):
    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_cases.py").write_text(CASES)
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(tmp_path),
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            "",
            "--rootdir",
            str(tmp_path),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    out = p.stdout
    assert "2 failed, 2 passed" in out, out[-3000:]
    assert "test_coordinator_without_device: Coordinator with device=auto; a CPU test must say device=cpu" in out
    assert "test_run_py_without_device: subprocess" in out and "run.py +experiment=cmepso logger=none" in out
