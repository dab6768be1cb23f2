"""P3's "token identity explains almost nothing" (§5.3, tex lines 223–230): the author's
token-feature regression of δ, as the stored forensics file holds it."""

from __future__ import annotations

from nlbudget.assets.reference import reference

FORENSICS_FILE = "forensics_gpt2-medium.json"


def author_token_features() -> str:
    """P3's token-feature regression of δ (forensics_gpt2-medium.json; tex lines 223–230:
    "Token identity explains almost nothing"), reported beside the row, not judged: the paper
    puts no bound on "almost nothing". Says where the file and the text differ."""
    f = reference("forensics")
    text = {1: 0.002, 12: 0.013, 23: 0.008}  # tex lines 227–229, as the text gives them
    r2 = ", ".join(f"L{r.layer} {r.r_squared:.4f}" for r in f.itertuples())
    off = [r for r in f.itertuples() if round(r.r_squared, 3) != text.get(r.layer)]
    fw = ", ".join(f"L{r.layer} {r.function_word_r:+.3f}" for r in f.itertuples())
    return (f"{f.model[0]} token features (the stored {FORENSICS_FILE}: {f.n_features[0]} "
            f"features on {f.n_tokens[0]:,} tokens, not the text's 13 on 50,000) explain R² "
            f"{r2} of δ's variance"
            + "".join(f"; the text's L{r.layer} {text[r.layer]} is not the file's "
                      f"{r.r_squared:.4f}" for r in off)
            + f"; function-word r {fw} (the text: 0.002 at L1, 0.05 at L23)")
