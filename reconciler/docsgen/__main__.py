"""`python -m reconciler.docsgen [--write] [--root DIR]`: write (or check) the generated reference files.

The one place the generated reference touches the file system. Without --write it only compares and exits 1
naming the stale files, so CI or a pre-commit hook can run it as a check.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from reconciler.docsgen import GENERATED


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reconciler.docsgen", description=__doc__)
    parser.add_argument("--write", action="store_true", help="write the files (default: only check them)")
    parser.add_argument("--root", type=Path, default=Path("."), help="the repository root (default: .)")
    args = parser.parse_args(argv)
    stale = []
    for rel, generate in GENERATED.items():
        path = args.root / rel
        text = generate()
        current = path.read_text(encoding="utf-8") if path.is_file() else None
        if current == text:
            continue
        stale.append(rel)
        if args.write:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    for rel in stale:
        print(f"{'wrote' if args.write else 'stale'}: {rel}")
    return 0 if args.write or not stale else 1


if __name__ == "__main__":
    sys.exit(main())
