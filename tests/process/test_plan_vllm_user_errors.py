"""vLLM plans that cannot be made end in one line on stderr and exit status 2, never a traceback."""

from __future__ import annotations

import subprocess
import sys


def test_mtp_on_an_all_mamba_model_is_a_one_line_error() -> None:
    # it raised ZeroDivisionError (a zero-byte draft page in the page unification) before
    out = subprocess.run([sys.executable, "-m", "specbench", "plan", "--json", "--no-fixes", "--", "vllm", "serve",
                          "state-spaces/mamba-130m-hf", "--speculative-config",
                          '{"method": "mtp", "num_speculative_tokens": 2}'], capture_output=True, text=True)
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("specbench: error: speculative method 'mtp' drafts with the target's attention")
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
