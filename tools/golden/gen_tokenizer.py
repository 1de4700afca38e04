"""Golden fixtures for the WordPiece tokenizer (tests/unit/tokenizer_test.cpp): Hugging Face
BertTokenizerFast ids over the bert-base-uncased vocab.

Generated with transformers 5.24.0 and tokenizers 0.23.3 (the versions actually used are
also written into each fixture). Run:
    python3 -m venv $VENV_GOLD && $VENV_GOLD/bin/pip install tokenizers transformers
    $VENV_GOLD/bin/python tools/golden/gen_tokenizer.py [--data ../shared/data]

Writes
  tests/fixtures/tokenizer_glue.json    every example of the six GLUE dev sets as the
      fine-tuning data is encoded (pairs where the task has two texts, max_length 128,
      truncation longest_first): per example the FNV-1a hash and length, full ids for the
      first EXAMPLES_IN_FULL of each task.
  tests/fixtures/tokenizer_golden.json  hand-made tricky texts with full ids and tokens.
With --sweep DIR it writes no fixture but DIR/sweep_input.txt, one line "x{c}y A{c} {c}{c}b"
per code point c of planes 0-2 and 14, and DIR/sweep_hf.jsonl, HF's ids per line; then
    leanback tokenize --vocab VOCAB < DIR/sweep_input.txt > DIR/sweep_ours.jsonl
    $VENV_GOLD/bin/python tools/golden/gen_tokenizer.py --compare DIR
lists the code points where the two differ, by Unicode category (not a test: the known
differences come from HF's older Unicode table, see src/data/basic_tokenizer.cpp).

Hash (the C++ test computes the same): 64-bit FNV-1a (offset 0xcbf29ce484222325, prime
0x100000001b3) over the bytes of every input id as a 4-byte little-endian unsigned integer,
then every token type id as one byte. Stored as 16 lower-case hex digits.

Note: in transformers 5 BertTokenizerFast(vocab_file=...) silently ignores vocab_file and
builds an empty vocab; the tokenizer is therefore loaded with from_pretrained from a
directory holding only vocab.txt, which is how a model directory is read, and checked
against tokenizers' own BertWordPieceTokenizer on every hand-made case.
"""
import argparse
import csv
import json
import os
import shutil
import sys
import tempfile

import tokenizers
import transformers
from tokenizers import BertWordPieceTokenizer
from transformers import BertTokenizerFast

MAX_LENGTH = 128
EXAMPLES_IN_FULL = 30
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# task -> (file, has_header, columns of the text(s): header names, or indices without header)
GLUE_TASKS = {
    "CoLA": ("CoLA/dev.tsv", False, [3]),
    "SST-2": ("SST-2/dev.tsv", True, ["sentence"]),
    "MRPC": ("MRPC/dev.tsv", True, ["#1 String", "#2 String"]),
    "STS-B": ("STS-B/dev.tsv", True, ["sentence1", "sentence2"]),
    "RTE": ("RTE/dev.tsv", True, ["sentence1", "sentence2"]),
    "WNLI": ("WNLI/dev.tsv", True, ["sentence1", "sentence2"]),
}


def fnv1a64(input_ids, token_type_ids):
    h = 0xCBF29CE484222325
    data = b"".join(i.to_bytes(4, "little") for i in input_ids) + bytes(token_type_ids)
    for byte in data:
        h ^= byte
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def read_glue(path, has_header, columns):
    """The texts of each row (utf-8-sig drops MRPC's BOM; QUOTE_NONE as the files use no
    quoting; blank lines skipped)."""
    with open(path, encoding="utf-8-sig", newline="") as f:
        rows = [r for r in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE) if r]
    if has_header:
        header, rows = rows[0], rows[1:]
        columns = [header.index(c) for c in columns]
    return [[r[c] for c in columns] for r in rows]


def encode(tok, a, b=None, max_length=None):
    kw = {"truncation": "longest_first", "max_length": max_length} if max_length else {}
    e = tok(a, b, **kw) if b is not None else tok(a, **kw)
    return e["input_ids"], e["token_type_ids"]


# Hand-made cases: (name, a, b or None, max_len or 0). Text given as bytes is tokenized by HF
# after decoding with errors="replace" (as a reader of untrusted bytes would) and stored as hex.
LONG_100 = "a" * 100
CASES = [
    ("empty", "", None, 0),
    ("whitespace_only", " \t\n\r \u00a0\u3000 ", None, 0),
    ("plain", "The quick brown fox jumps over the lazy dog.", None, 0),
    ("accents", "café naïve Ångström ÀÉÎÕÜ résumé façade", None, 0),
    ("accents_decomposed", "cafe\u0301 na\u0308ive A\u030angstro\u0308m", None, 0),
    ("combining_sequences", "q\u0323\u0307 a\u0301\u0323 x\u0315\u0300y \u1e69 \u0345a", None, 0),
    ("cjk", "中文字符", None, 0),
    ("cjk_mixed_latin", "BERT模型在中文上abc混合123文本", None, 0),
    ("cjk_extension_and_compat", "\u3400\u4dbf \U00020000 \uf900\ufa0b \U0002f800x", None, 0),
    # tokenizers' is_chinese_char starts Extension E at 0x2B920 (Python BERT: 0x2B820).
    ("cjk_extension_e_boundary", "a\U0002b81fb\U0002b820c\U0002b91fd\U0002b920e\U0002ceaff", None, 0),
    ("japanese_kana", "ひらがなとカタカナ、日本語のテキストです。ｶﾀｶﾅ", None, 0),
    ("korean_hangul", "한국어 텍스트입니다 안녕하세요", None, 0),
    ("emoji", "I love it 😀😂👍🏽 🥺 🫠!", None, 0),
    ("emoji_zwj", "family 👨\u200d👩\u200d👧\u200d👦 flag 🏳️\u200d🌈 ok", None, 0),
    ("control_chars", "a\x01b\x7fc\x00d\x1fe\x0bf\x0cg\x85h", None, 0),
    ("format_chars", "zero\u200bwidth bom\ufeffhere soft\u00adhyphen lrm\u200emark tag\U000e0041s", None, 0),
    ("private_use_and_replacement", "pri\ue000vate rep\ufffdlacement", None, 0),
    ("unassigned", "un\u0378assigned", None, 0),
    ("nbsp_and_spaces", "a\u00a0b\u2000c\u2001d\u2002e\u2003f\u2004g\u2005h\u2006i\u2007j\u2008k\u2009l\u200am", None, 0),
    ("other_spaces", "a\u3000b\u1680c\u202fd\u205fe\u2028f\u2029g\u180eh", None, 0),
    ("tabs_newlines", "line one\nline two\r\nthree\tfour", None, 0),
    ("long_word_101", "a" * 101 + " ok", None, 0),
    ("long_word_100", LONG_100 + " ok", None, 0),
    ("long_word_100_accented", "é" * 100 + " " + "é" * 101, None, 0),
    ("punctuation_runs", "Wait... what?!?! (yes) [no] {maybe} <x> a--b ~`@#$%^&*_+=|\\/", None, 0),
    ("unicode_punctuation", "«quoted» „low“ ‘single’ — dash – ¿qué? ¡sí! ·・。、【】", None, 0),
    ("numbers", "3.14159 1,000,000 42nd 2023-01-15 +7 -3 1e10 ½ ² ٣", None, 0),
    ("apostrophes", "don't it's rock'n'roll O'Neil dogs' 'quoted' it’s", None, 0),
    ("turkish_dotted_i", "İstanbul İİ Iİ ıi DİYARBAKIR", None, 0),
    ("german_eszett", "Straße STRASSE ẞ groß", None, 0),
    ("greek_tonos", "Ελληνικά άέήίόύώ ΐΰ ΆΈΉΊΌΎΏ ς σ Σ", None, 0),
    ("cyrillic_arabic_hebrew_devanagari", "Привет мир مرحبا שָׁלוֹם नमस्ते", None, 0),
    ("ligatures_and_compat", "ﬁnance ﬀ ℌ ℡ ① Ⅻ Ｆｕｌｌｗｉｄｔｈ K Å Ω", None, 0),
    ("titlecase_digraphs", "ǅ ǈ ǋ ǲ", None, 0),
    ("special_tokens_in_text", "hello [MASK] world [SEP]x[CLS] [cls] [UNK][PAD] [[SEP]] [MASK", None, 0),
    ("wordpiece_splits", "unaffable tokenization transformers playing jumped unbelievably", None, 0),
    ("no_match_word", "xqzjvkw qqqqqqqq", None, 0),
    ("mixed_scripts_word", "abcабв abc中 naïveté", None, 0),
    ("invalid_utf8", b"ab\xffcd \xe2\x82 ok \xed\xa0\x80 end\xc3", None, 0),
    ("pair_no_truncation", "The cat sat.", "On the mat!", 0),
    ("pair_truncate_a", "one two three four five six seven eight nine ten", "a b c", 9),
    ("pair_truncate_b", "a b c", "one two three four five six seven eight nine ten", 9),
    ("pair_truncate_both_even", "a b c d e f", "g h i j k l", 9),
    ("pair_truncate_both_odd_budget", "a b c d e f", "g h i j k l", 10),
    ("pair_truncate_a_longer_by_one", "a b c d e f g", "h i j k l m", 8),
    ("pair_truncate_b_longer_by_one", "a b c d e f", "g h i j k l m", 8),
    ("pair_min_length", "a b c", "d e f", 3),
    ("pair_empty_b", "hello world", "", 5),
    ("single_truncate", "one two three four five six seven eight nine ten", None, 5),
    ("single_min_length", "one two", None, 2),
    ("single_exact_fit", "one two three", None, 5),
]


def as_text(x):
    return x.decode("utf-8", errors="replace") if isinstance(x, bytes) else x


def load_tokenizers(vocab_path):
    tmp = tempfile.mkdtemp(prefix="lb_tok_")
    shutil.copy(vocab_path, os.path.join(tmp, "vocab.txt"))
    fast = BertTokenizerFast.from_pretrained(tmp)
    assert len(fast) == sum(1 for _ in open(vocab_path, encoding="utf-8")), "vocab not loaded"
    shutil.rmtree(tmp)
    norm = fast.backend_tokenizer.normalizer
    assert "lowercase=True" in str(norm) and "strip_accents=None" in str(norm), str(norm)
    raw = BertWordPieceTokenizer(vocab_path, lowercase=True)  # the bare tokenizers pipeline
    return fast, raw


def golden_cases(fast, raw):
    out = []
    for name, a, b, max_len in CASES:
        ta, tb = as_text(a), (as_text(b) if b is not None else None)
        ids, types = encode(fast, ta, tb, max_len)
        case = {"name": name}
        # The Rust pipeline directly, as a cross-check. It differs from transformers' __call__
        # in one place: transformers drops an empty text_pair (a single text), tokenizers
        # encodes it as a pair ([CLS] a [SEP] [SEP]); our encode(a, &b) with b empty is a pair.
        backend = raw if max_len == 0 else fast.backend_tokenizer
        if max_len:
            backend.enable_truncation(max_len, strategy="longest_first")
        enc = backend.encode(ta, tb) if tb is not None else backend.encode(ta)
        backend.no_truncation()
        if tb == "":
            case["note"] = "tokenizers' pair encoding; transformers treats an empty pair as none"
            ids, types = enc.ids, enc.type_ids
        assert enc.ids == ids and enc.type_ids == types, (name, enc.ids, ids)
        for key, x in (("a", a), ("b", b)):
            if x is None:
                continue
            if isinstance(x, bytes):
                case[key + "_hex"] = x.hex()
            else:
                case[key] = x
        case["max_len"] = max_len
        case["input_ids"] = ids
        case["token_type_ids"] = types
        case["tokens"] = fast.convert_ids_to_tokens(ids)
        out.append(case)
    return out


def glue(fast, data):
    tasks = {}
    for task, (rel, has_header, columns) in GLUE_TASKS.items():
        rows = read_glue(os.path.join(data, "glue", rel), has_header, columns)
        hashes, lengths, examples = [], [], []
        for i, texts in enumerate(rows):
            ids, types = encode(fast, texts[0], texts[1] if len(texts) > 1 else None, MAX_LENGTH)
            hashes.append(fnv1a64(ids, types))
            lengths.append(len(ids))
            if i < EXAMPLES_IN_FULL:
                examples.append({"input_ids": ids, "token_type_ids": types})
        tasks[task] = {"file": "glue/" + rel, "header": has_header, "columns": columns,
                       "count": len(rows), "hashes": "".join(hashes), "lengths": lengths,
                       "examples": examples}
        print(f"{task}: {len(rows)} examples", file=sys.stderr)
    return tasks


def sweep_code_points():
    return [c for c in range(0x80, 0x110000)
            if not 0xD800 <= c <= 0xDFFF and (c < 0x30000 or c >= 0xE0000)]


def sweep(fast, out_dir):
    lines = [f"x{chr(c)}y A{chr(c)} {chr(c)}{chr(c)}b" for c in sweep_code_points()]
    with open(os.path.join(out_dir, "sweep_input.txt"), "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)
    with open(os.path.join(out_dir, "sweep_hf.jsonl"), "w") as f:
        for e in fast.backend_tokenizer.encode_batch(lines):
            f.write(json.dumps({"input_ids": e.ids}) + "\n")


def compare(out_dir):
    import collections
    import unicodedata

    def ids(name):
        with open(os.path.join(out_dir, name)) as f:
            return [json.loads(line)["input_ids"] for line in f]

    differ = [c for c, h, o in zip(sweep_code_points(), ids("sweep_hf.jsonl"), ids("sweep_ours.jsonl"))
              if h != o]
    print(f"{len(differ)} of {len(sweep_code_points())} code points differ (Python's Unicode "
          f"{unicodedata.unidata_version} categories):",
          dict(collections.Counter(unicodedata.category(chr(c)) for c in differ).most_common()))
    for c in differ:
        print(f"U+{c:04X} {unicodedata.category(chr(c))} {unicodedata.name(chr(c), '?')}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=os.path.join(os.path.dirname(ROOT), "shared", "data"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures"))
    ap.add_argument("--sweep", metavar="DIR", help="write the code point sweep instead")
    ap.add_argument("--compare", metavar="DIR", help="compare DIR/sweep_ours.jsonl with HF's")
    args = ap.parse_args()
    if args.compare:
        return compare(args.compare)
    vocab = os.path.join(args.data, "bert-base-uncased", "vocab.txt")
    fast, raw = load_tokenizers(vocab)
    if args.sweep:
        return sweep(fast, args.sweep)
    meta = {"generator": "tools/golden/gen_tokenizer.py",
            "reference": "transformers.BertTokenizerFast.from_pretrained(<dir with vocab.txt>)",
            "transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
            "vocab": "bert-base-uncased/vocab.txt",
            "hash": "FNV-1a 64 over input ids (u32 LE) then token type ids (u8)"}
    with open(os.path.join(args.out, "tokenizer_golden.json"), "w") as f:
        json.dump({**meta, "cases": golden_cases(fast, raw)}, f, ensure_ascii=True, indent=0)
        f.write("\n")
    with open(os.path.join(args.out, "tokenizer_glue.json"), "w") as f:
        json.dump({**meta, "max_length": MAX_LENGTH, "tasks": glue(fast, args.data)}, f,
                  ensure_ascii=True, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
