"""Exit with argv[1]; with argv[2] (a marker path), only the first time, then exit 0."""

import sys
from pathlib import Path

code = int(sys.argv[1])
marker = Path(sys.argv[2]) if len(sys.argv) > 2 else None
if marker is not None:
    if marker.exists():
        print("second attempt: exiting 0")
        sys.exit(0)
    marker.touch()
print(f"exiting {code}")
sys.exit(code)
