"""`python -m lens_testing.read_gguf FILE`: read a GGUF file as the bundled decoder's is read (header check, then
transformers' reader, then the cached folder), the way `python -m models` reports: exit 0, or one line on stderr and
exit 2. The replay of issue 41's crafted GGUF files runs each through this in its own bounded process."""

from __future__ import annotations

import sys
import tempfile


def main(argv: list[str]) -> int:
    import os

    from models.errors import AttnVizError, one_line

    os.environ["ATTENTION_LENS_CACHE_DIR"] = tempfile.mkdtemp(prefix="gguf-replay-")
    from models import gguf

    try:
        gguf.cached_folder(argv[0])
    except AttnVizError as err:
        print(f"error: {one_line(err, 400)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
