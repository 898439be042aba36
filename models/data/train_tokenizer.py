"""Train the small byte-level BPE tokenizer the `random:` decoders ship with; writes tokenizer.json beside this file.

No GPT-2 vocabulary exists offline, so `random:gpt2` and `random:gpt2-tiny` tokenize with this one: byte-level BPE
(GPT-2's scheme: every UTF-8 byte is a base symbol, so any text encodes, emoji and Chinese included), trained once
on `tokenizer_corpus.txt` (English and Chinese written for this project). Run again only to change it:

    python models/data/train_tokenizer.py
"""

from __future__ import annotations

from pathlib import Path

from tokenizers import ByteLevelBPETokenizer

HERE = Path(__file__).resolve().parent
VOCAB_SIZE = 2048  # 256 bytes, merges up to this size, and <|endoftext|>
EOS = "<|endoftext|>"


def main() -> None:
    bpe = ByteLevelBPETokenizer(add_prefix_space=False)
    bpe.train(files=[str(HERE / "tokenizer_corpus.txt")], vocab_size=VOCAB_SIZE, min_frequency=2, special_tokens=[EOS])
    out = HERE / "tokenizer.json"
    bpe.save(str(out))
    print(f"{out}: {bpe.get_vocab_size()} tokens, {out.stat().st_size / 1024:.0f} kB")


if __name__ == "__main__":
    main()
