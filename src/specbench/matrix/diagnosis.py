"""The doctor's diagnosis of a failed server's whole log, as the JSON dict the store keeps, and the one-line
suffix a failed cell's reason carries."""

from __future__ import annotations

from typing import Any


def diagnose(log_text: str) -> dict[str, Any]:
    """`specbench.doctor.doctor.diagnose_text` on a whole log; a doctor error never hides the failure it explains."""
    from specbench.doctor import doctor

    try:
        return dict(doctor.diagnose_text(log_text).to_json())
    except Exception as exc:  # a diagnosis must never hide the failure it explains
        return {"status": "unknown", "failure": None, "explanation": f"doctor raised {exc!r}"}


def failure_suffix(diag: dict[str, Any]) -> str:
    failure = diag.get("failure") if isinstance(diag, dict) else None
    if isinstance(failure, dict) and failure.get("message"):
        return f" [{failure.get('kind', 'error')}: {str(failure['message']).strip().splitlines()[0][:300]}]"
    return ""
