"""Write many long lines quickly, in several small writes each, to test that lines never interleave."""

import sys

for i in range(300):
    # Three unflushed-together writes per line: a reader splitting on anything but newlines would tear them.
    sys.stdout.write(f"line={i} ")
    sys.stdout.flush()
    sys.stdout.write("x" * 200)
    sys.stdout.flush()
    sys.stdout.write(f" end={i}\n")
    sys.stdout.flush()
sys.stdout.write("last line without newline")
