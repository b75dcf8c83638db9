"""What an SGLang release can serve, as data read from its own source by tools/engine/engine_registry.py: the model
architectures (`architectures/<release>.txt`: `sglang/srt/models/*.py` EntryClass), the speculative algorithms
(`spec_algorithms/<release>.txt`: `speculative/spec_info.py::SpeculativeAlgorithm`) and the `--quantization`
choices (`quant_methods/<release>.txt`: `server_args.py::QUANTIZATION_CHOICES`, `arg_groups/choices.py` from 0.5.18).

A release between two lists is read with the older one (engines/cli_flags.py::flag_list); a name missing there but
present in a newer list may have been added in between, so only a name that no list at or after it holds, or a
release whose own list was read, is refused (`ReleaseList.refuses`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from specbench.engines import versions
from specbench.engines.cli_flags import _lists, flag_list

_HERE = Path(__file__).parent
# the algorithms specbench's SGLang rules size (formulas.py::resolve_spec): NEXTN is the engine's alias of EAGLE
# (arg_groups/speculative_hook.py@0.5.15.post1, spec_info.py::_RESERVED_ALIASES@0.5.23); DDTREE follows the open
# upstream PR #29907
MODELLED_ALGORITHMS = ("DFLASH", "EAGLE", "EAGLE3", "FROZEN_KV_MTP", "STANDALONE", "NGRAM", "NEXTN", "DDTREE")
ALIASES = ("NEXTN", "DDTREE")


@dataclass(frozen=True)
class ReleaseList:
    release: str               # the release whose list was read
    exact: bool                # the asked release is that one (same base version)
    names: frozenset[str]
    later: frozenset[str]      # names of the lists of newer releases

    def refuses(self, name: str) -> bool:
        """The release would not know `name`: not in its list, and (for a release between lists) in no newer one."""
        return name not in self.names and (self.exact or name not in self.later)


@cache  # package data, read once a process: the start checks ask it for every candidate of the fixes search
def _read(kind: str, release: str | None) -> ReleaseList:
    folder = _HERE / kind
    fl = flag_list(folder, release)
    want = versions.parse_release(release) if release else None
    have = versions.parse_release(fl.release)
    exact = want is None or want == have
    later: set[str] = set()
    for v, _path in _lists(str(folder)):
        rel = versions.parse_release(str(v))
        if have is not None and rel is not None and rel > have:
            later |= set(flag_list(folder, str(v)).kinds)
    return ReleaseList(fl.release, exact, frozenset(fl.kinds), frozenset(later))


def architectures(release: str | None) -> ReleaseList:
    return _read("architectures", release)


def spec_algorithms(release: str | None) -> ReleaseList:
    r = _read("spec_algorithms", release)
    return ReleaseList(r.release, r.exact, r.names | set(ALIASES), r.later)


def quant_methods(release: str | None) -> ReleaseList:
    return _read("quant_methods", release)


def not_modelled(algorithm: str, release: str | None) -> bool:
    """An algorithm the release knows that specbench does not size (SGLang 0.5.23: DSPARK, UNO)."""
    return algorithm not in MODELLED_ALGORITHMS and not spec_algorithms(release).refuses(algorithm)
