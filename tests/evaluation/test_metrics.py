from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tmem_core.evaluation import choice_correct, exact_match, locomo_f1, normalise
from tmem_core.evaluation._metrics import choice_letter, token_f1


def test_normalisation_follows_locomo() -> None:
    assert normalise("The cat, and a Dog!") == "cat dog"


def test_token_f1_hand_computed() -> None:
    # pred stems: {went, to, pari} gold stems: {pari, franc}: 1 shared
    # precision 1/3, recall 1/2 -> F1 = 2*(1/6)/(5/6) = 0.4
    assert token_f1("went to Paris", "Paris France") == pytest.approx(0.4)
    assert token_f1("running", "runs") == 1.0  # Porter stemming: run == run
    assert token_f1("nothing", "something else") == 0.0


def test_multi_hop_uses_partial_f1_over_comma_parts() -> None:
    # gold parts: "painting" (best pred part "painting" -> 1.0),
    # "swimming" (best: "camping" 0, "painting" 0 -> 0) -> mean 0.5
    assert locomo_f1("painting, camping", "painting, swimming", "multi-hop") == 0.5
    # the same strings as single-hop: commas dropped, 1 of 2 tokens each side -> 0.5 too,
    # but a longer prediction is penalised only in single-hop
    assert locomo_f1("painting, camping, hiking", "painting, swimming", "multi-hop") == 0.5
    assert locomo_f1("painting, camping, hiking", "painting, swimming",
                     "single-hop") == pytest.approx(2 * (1 / 3) * (1 / 2) / (1 / 3 + 1 / 2))


def test_open_domain_cuts_gold_at_semicolon() -> None:
    assert locomo_f1("psychology", "psychology; counseling certification", "open-domain") == 1.0
    assert locomo_f1("psychology", "psychology; counseling", "single-hop") < 1.0


def test_adversarial_by_the_not_mentioned_rule() -> None:
    assert locomo_f1("That is not mentioned in the conversation.", None, "adversarial") == 1.0
    assert locomo_f1("No information available", None, "adversarial") == 1.0
    assert locomo_f1("She went to Paris", None, "adversarial") == 0.0


def test_exact_match_normalises() -> None:
    assert exact_match("The 5 attempts.", "5 attempts")
    assert not exact_match("5 attempts", "7 attempts")


@pytest.mark.parametrize(("text", "letter"), [
    ("B", "B"), ("(C) Designer", "C"), ("The answer is D.", "D"), ("Answer: A", "A"),
    ("I think it's b", None), ("E", None), ("", None), ("Either A or maybe C", None),
])
def test_choice_letter(text: str, letter: str | None) -> None:
    assert choice_letter(text, ("A", "B", "C", "D")) == letter


def test_choice_scoring_needs_no_llm() -> None:
    assert choice_correct("(B) Product manager", "B", ("A", "B", "C", "D"))
    assert not choice_correct("A or B", "B", ("A", "B", "C", "D"))


STEM_SCRIPT = """
import json, sys
words = json.load(open(sys.argv[1]))
if sys.argv[2] == "ours":
    from tmem_core.evaluation import stemmer
    porter = stemmer()
    skipped_scipy = "scipy.stats" not in sys.modules
    import scipy.stats  # still importable
else:
    from nltk.stem import PorterStemmer
    porter, skipped_scipy = PorterStemmer(), None
print(json.dumps({"stems": [porter.stem(w) for w in words], "skipped_scipy": skipped_scipy}))
"""


def test_stemmer_stems_as_nltk_imported_whole(locomo_path: Path, tmp_path: Path) -> None:
    """The stemmer loads nltk without scipy.stats, yet stems every LoCoMo word as nltk does
    when imported the usual way (each in a fresh interpreter)."""
    words = sorted({w for w in re.findall(r"[a-z']+", locomo_path.read_text().lower())})
    vocabulary = tmp_path / "words.json"
    vocabulary.write_text(json.dumps(words))

    def stems(how: str) -> dict[str, object]:
        out = subprocess.run([sys.executable, "-c", STEM_SCRIPT, str(vocabulary), how],
                             capture_output=True, text=True, check=True)
        return dict(json.loads(out.stdout))

    ours, whole = stems("ours"), stems("whole")
    assert len(words) > 3000
    assert ours["skipped_scipy"] is True
    assert ours["stems"] == whole["stems"]
