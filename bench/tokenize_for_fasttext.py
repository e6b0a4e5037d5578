#!/usr/bin/env python3
"""Pre-tokenize a label<TAB>text TSV the way `tributary convert` does, for a
fastText comparison on the same tokens (bench/peers_real.sh).

Writes two files with one line per input line, in order:
  --tsv-out  label<TAB>tok tok tok   (re-converted by tributary: every token
                                      tokenizes to itself, so tributary sees
                                      exactly these tokens)
  --ft-out   __label__label tok tok tok   (fastText's supervised format)

The tokens follow tributary's tokenizer, version 2 (lib/src/core/tokenizer.cc,
docs/tokenizer.md): NFKC_Casefold, words are maximal runs of letters (L*) and
numbers (N*) with the combining marks (M*) that follow them, everything else
separates (apostrophes included: "don't" -> "don", "t"), invalid UTF-8
separates, letters of Han / Hiragana / Thai / Lao / Khmer / Myanmar are one
token each (a Khmer COENG / Myanmar VIRAMA keeps the next consonant in the
cluster), a Katakana run is one word. ASCII is exact by construction (ASCII
letters lowercased, [a-z0-9] runs); the rest uses Python's unicodedata, whose
Unicode version may differ from utf8proc's. It is a port, not the C++ code:
bench/peers_real.sh therefore checks the result against tributary itself (the
vocabulary of the raw TSV converted by tributary must be exactly the set of
distinct tokens written here) and refuses to measure otherwise.

Prints on stderr: documents, tokens, distinct tokens, documents without tokens.
"""
import argparse
import sys
import unicodedata


def single_char_script(c):
    if c < 0x0E00:
        return False
    return (c <= 0x0EFF or 0x1000 <= c <= 0x109F or 0x1780 <= c <= 0x17FF or 0x19E0 <= c <= 0x19FF
            or 0x3000 <= c <= 0x309F or 0x3400 <= c <= 0x4DBF or 0x4E00 <= c <= 0x9FFF
            or 0xA9E0 <= c <= 0xA9FF or 0xAA60 <= c <= 0xAA7F or 0xF900 <= c <= 0xFAFF
            or 0x1B000 <= c <= 0x1B16F or 0x20000 <= c <= 0x3FFFF)


def katakana(c):
    return 0x30A0 <= c <= 0x30FF or 0x31F0 <= c <= 0x31FF or 0x1AFF0 <= c <= 0x1AFFF


SEP, MARK, WORD, KATA, SINGLE = range(5)


def classify(ch):
    c = ord(ch)
    if c < 0x80:
        return WORD if ch.isascii() and ch.isalnum() else SEP
    cat = unicodedata.category(ch)
    if cat in ("Lu", "Ll", "Lt", "Lm", "Lo", "Nl", "No"):
        if single_char_script(c):
            return SINGLE
        return KATA if katakana(c) else WORD
    if cat == "Nd":
        return WORD
    if cat in ("Mn", "Mc", "Me"):
        return MARK
    return SEP


def default_ignorable(ch):
    # Default_Ignorable_Code_Point (DerivedCoreProperties), the parts that matter in practice.
    c = ord(ch)
    return (unicodedata.category(ch) == "Cf" or c == 0x034F or 0x115F <= c <= 0x1160 or 0x17B4 <= c <= 0x17B5
            or 0x180B <= c <= 0x180F or c == 0x3164 or 0xFE00 <= c <= 0xFE0F or c == 0xFFA0
            or 0xE0000 <= c <= 0xE0FFF)


_decomp_cache = {}


def decompose(ch):
    """NFKC_Casefold minus composition, one code point (cached)."""
    d = _decomp_cache.get(ch)
    if d is None:
        if default_ignorable(ch):
            d = ""
        else:
            d = unicodedata.normalize("NFKD", unicodedata.normalize("NFKD", ch).casefold())
            d = "".join(x for x in d if not default_ignorable(x))
        _decomp_cache[ch] = d
    return d


def tokenize(text):
    tokens = []
    word = []
    cls_word = None
    stacking = False

    def flush():
        nonlocal word, stacking
        if word:
            tokens.append(unicodedata.normalize("NFC", "".join(word)))
            word = []
        stacking = False

    for ch in text:
        if ch.isascii():
            # Fast path: ASCII decomposes to itself (case-folded).
            pieces = ch.lower()
        else:
            pieces = decompose(ch)
        for p in pieces:
            k = classify(p)
            if k == SEP:
                flush()
                continue
            if k == MARK:
                if not word:
                    continue
            elif k in (WORD, KATA):
                if word and cls_word != k:
                    flush()
                cls_word = k
            else:  # SINGLE
                if word and not (cls_word == SINGLE and stacking):
                    flush()
                cls_word = k
            stacking = (stacking or ord(p) in (0x17D2, 0x1039)) if k == MARK else False
            word.append(p)
    flush()
    return tokens


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--in", dest="inp", required=True, help="label<TAB>text TSV")
    ap.add_argument("--tsv-out", required=True, help="pre-tokenized TSV for tributary convert")
    ap.add_argument("--ft-out", required=True, help="fastText supervised input")
    a = ap.parse_args()
    docs = ntok = empty = 0
    vocab = set()
    with open(a.inp, "rb") as f, open(a.tsv_out, "w", encoding="utf-8", newline="\n") as tsv, \
            open(a.ft_out, "w", encoding="utf-8", newline="\n") as ft:
        for raw in f:
            raw = raw.rstrip(b"\r\n")
            if not raw:
                continue
            label, _, text = raw.partition(b"\t")
            label = label.decode("utf-8")
            if not label or any(ch.isspace() for ch in label):
                sys.exit(f"tokenize_for_fasttext: unusable label {label!r} (fastText labels have no spaces)")
            toks = tokenize(text.decode("utf-8", errors="replace"))  # U+FFFD is a separator, as bad bytes are
            docs += 1
            ntok += len(toks)
            empty += not toks
            vocab.update(toks)
            line = " ".join(toks)
            tsv.write(f"{label}\t{line}\n")
            ft.write(f"__label__{label} {line}\n")
    print(f"documents={docs} tokens={ntok} distinct_tokens={len(vocab)} empty_documents={empty}", file=sys.stderr)


if __name__ == "__main__":
    main()
