"""A deterministic training text for the tiny tokenizer: no files, no network, same lines for the same seed.

English function words and serving vocabulary, pseudo-words built from syllables (they give the BPE trainer
enough distinct pairs to reach a vocabulary of several thousand), numbers, punctuation and a little code, so
that prompts of any kind tokenize into ordinary multi-byte tokens.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

WORDS = (
    "the of and to in is you that it he was for on are as with his they at be this have from or one had by word "
    "but not what all were we when your can said there use an each which she do how their if will up other about "
    "out many then them these so some her would make like him into time has look two more write go see number no "
    "way could people my than first water been call who its now find long down day did get come made may part "
    "over new sound take only little work know place year live me back give most very after thing our just name "
    "good sentence man think say great where help through much before line right too mean old any same tell boy "
    "follow came want show also around form three small set put end does another well large must big even such "
    "because turn here why ask went men read need land different home us move try kind hand picture again change "
    "off play spell air away animal house point page letter mother answer found study still learn should world "
    "model token tokens prompt output input draft target server request latency throughput memory cache context "
    "length batch decode prefill speculative decoding accept accepted rejected tree block layer layers attention "
    "state mamba linear hybrid expert experts weight weights tensor parallel pipeline engine launch start stop "
    "user assistant system hello please answer question explain summarize translate code function return value "
    "error warning info debug config option flag default maximum minimum average median percent second seconds"
).split()

SYLLABLES = (
    "ka ke ki ko ku ra re ri ro ru ta te ti to tu na ne ni no nu ma me mi mo mu sa se si so su la le li lo lu "
    "pa pe pi po pu da de di do du ga ge gi go gu ba be bi bo bu va ve vi vo vu za ze zi zo zu sha shi cho chu "
    "tra tre pro pri str ver ion ent ant est ing ter der ber mor lin gar dor vel tor quin xa xe yo yu fa fe fi"
).split()

CODE = (
    "def main():", "return x + y", "for i in range(n):", "if x is None:", "import numpy as np", "print(result)",
    "{\"key\": \"value\"}", "x = [1, 2, 3]", "while True:", "class Model:", "self.layers = []", "#include <stdio.h>",
    "int main(void) {", "} else {", "SELECT * FROM cells;", "git commit -m", "--max-model-len 4096",
)

ROLES = ("system", "user", "assistant")

PUNCT = (".", ",", "!", "?", ";", ":", " -", " (", ")", "\"", "'")


def _pseudo_words(rng: np.random.Generator, n: int) -> list[str]:
    out = []
    for _ in range(n):
        k = int(rng.integers(2, 5))
        out.append("".join(SYLLABLES[int(i)] for i in rng.integers(0, len(SYLLABLES), size=k)))
    return out


def corpus_lines(seed: int = 0, n_lines: int = 6000) -> Iterator[str]:
    """Yield `n_lines` lines of training text; the same seed always gives the same lines."""
    rng = np.random.default_rng(seed)
    invented = _pseudo_words(rng, 3000)
    for _ in range(n_lines):
        kind = int(rng.integers(0, 10))
        if kind == 0:
            yield CODE[int(rng.integers(0, len(CODE)))] + " " + str(int(rng.integers(0, 100000)))
            continue
        words = []
        for _ in range(int(rng.integers(6, 20))):
            r = float(rng.random())
            if r < 0.6:
                words.append(WORDS[int(rng.integers(0, len(WORDS)))])
            elif r < 0.93:
                words.append(invented[int(rng.integers(0, len(invented)))])
            else:
                words.append(str(int(rng.integers(0, 10000))))
        line = " ".join(words)
        line = line[0].upper() + line[1:] + PUNCT[int(rng.integers(0, len(PUNCT)))]
        if kind == 1:  # a ChatML turn body: the role opens the line, as after <|im_start|>
            line = ROLES[int(rng.integers(0, len(ROLES)))] + "\n" + line
        yield line
